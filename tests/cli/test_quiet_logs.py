"""Progress bars only on a terminal: with output to files (a log, torchrun's, a container's), `train
--dataset` (partitioning, then training) writes plain lines, one per epoch, and no carriage-return updates."""

from __future__ import annotations

import subprocess
import sys

import pytest

from graphshard.datasets import community_graph, save_dataset

TRAIN = ["train", "--num-procs", "2", "--epochs", "2", "--batch-size", "32", "--fanouts", "3,3"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("quiet") / "data"
    save_dataset(community_graph(num_nodes=2000, seed=3), path)
    return path


def _graphshard(args: list[str], cwd, **streams) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphshard.cli", *args], cwd=cwd, timeout=300, **streams)


def test_output_to_files_has_no_progress_bars(dataset, tmp_path):
    with open(tmp_path / "out.log", "wb") as out, open(tmp_path / "err.log", "wb") as err:
        done = _graphshard([*TRAIN, "--dataset", str(dataset)], tmp_path, stdout=out, stderr=err)
    text = (tmp_path / "out.log").read_bytes() + (tmp_path / "err.log").read_bytes()
    assert done.returncode == 0, text.decode()[-2000:]
    assert b"\r" not in text  # tqdm redraws a bar with a carriage return
    lines = text.decode().splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("epoch")] == ["epoch   0", "epoch   1"]

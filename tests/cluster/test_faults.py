"""A host that stops answering is found within seconds by every survivor, whatever it was doing: its link
cut, its process frozen (SIGSTOP) or killed (SIGKILL) while training, validating, embedding or
dispatching. Each survivor stops with one line naming the lost rank, its host and what it was doing, which
torchrun then reports as the root cause; nothing is left that looks complete, and a rerun resumes."""

from __future__ import annotations

import json
import re
import shutil

from graphshard.chunked.writer import chunk_graph
from graphshard.datasets import community_graph
from graphshard.pipeline.assign import assign_chunked

from . import jobs
from .jobs import finish, spread, start
from .test_train import FAST, _partitions

HEARTBEAT = 3.0  # --heartbeat-timeout of the faulted runs: what the survivors wait for is this bound, not its default
DETECTED = HEARTBEAT + 4.0  # seconds from the fault to the survivor's line (the default 6 s would give 10)


def faulted(c, args: list[str], kind: str, at: str) -> tuple[float, str, str]:
    return jobs.faulted(c, [*args, "--heartbeat-timeout", str(HEARTBEAT)], kind, at)


def _check_reported(line: str, output: str, doing: str, seconds: float) -> None:
    assert seconds <= DETECTED, f"found after {seconds:.1f} s"
    assert line.startswith("lost rank 1 on host 198.18.0.2: ") and f"while it was {doing}" in line, line
    assert "noticed by rank 0 on 198.18.0.1" in line, line
    # torchrun's summary names the same line as the root cause (the rank's error file)
    assert line in [ln.split("traceback : ", 1)[1] for ln in output.splitlines() if "traceback : " in ln][-1:], output


def test_a_cut_link_while_training_is_found_and_the_rerun_resumes(cluster, tmp_path):
    c = cluster(2)
    mine = spread(_partitions(tmp_path), c, [[0], [1]])
    args = [
        "train",
        "--part-config",
        mine,
        *FAST,
        "--batch-size",
        "64",
        "--epochs",
        "5",
        "--checkpoint",
        "ckpt",
        "--metrics-out",
        "metrics.json",
    ]
    seconds, line, output = faulted(c, args, "cut", "training epoch 2")
    _check_reported(line, output, "training epoch 2", seconds)
    assert json.loads((c.hosts[0].workdir / "metrics.json").read_text())["complete"] is False
    c.heal(1)
    rerun = start(c, args, name="rerun")
    finish(rerun)
    printed = re.findall(r"^epoch +(\d+): [\d.]+ s ", rerun[0].output(), re.M)
    assert printed == ["2", "3", "4"], rerun[0].output()  # epochs 0 and 1 were checkpointed before the cut
    done = json.loads((c.hosts[0].workdir / "metrics.json").read_text())
    assert done["complete"] is True and [e["epoch"] for e in done["epochs"]] == [0, 1, 2, 3, 4]


def test_a_frozen_process_while_validating_is_found(cluster, tmp_path):
    c = cluster(2)
    mine = spread(_partitions(tmp_path), c, [[0], [1]])
    seconds, line, output = faulted(
        c, ["train", "--part-config", mine, *FAST, "--epochs", "3"], "stop", "validating after epoch 0"
    )
    _check_reported(line, output, "validating after epoch 0", seconds)
    assert "process frozen" in line


def test_a_killed_process_while_embedding_is_found_and_nothing_is_written(cluster, tmp_path):
    c = cluster(2)
    mine = spread(_partitions(tmp_path), c, [[0], [1]])
    finish(start(c, ["train", "--part-config", mine, *FAST, "--epochs", "1", "--checkpoint", "ckpt"], name="train"))
    seconds, line, output = faulted(
        c,
        ["embed", "--part-config", mine, "--checkpoint", "ckpt", "--out", "emb.npy", "--timeout", "60"],
        "kill",
        "computing embeddings",
    )
    _check_reported(line, output, "computing embeddings", seconds)
    assert not (c.hosts[0].workdir / "emb.npy").exists()


def test_a_cut_link_while_dispatching_is_found_and_nothing_is_published(cluster, tmp_path):
    g = community_graph(num_nodes=3000, num_classes=4, avg_degree=8, feat_dim=8, seed=5).graph
    chunk_graph(g, tmp_path / "chunks", 2, "numpy", graph_name="comm")
    assign_chunked(tmp_path / "chunks", tmp_path / "assign", 2, "random")
    c = cluster(2)
    for h in c.hosts:
        shutil.copytree(tmp_path / "chunks", h.workdir / "chunks")
        shutil.copytree(tmp_path / "assign", h.workdir / "assign")
    seconds, line, output = faulted(
        c,
        ["dispatch", "--dataset", "chunks", "--assignment", "assign", "--out", "out", "--timeout", "60"],
        "cut",
        "dispatch: exchanging",
    )
    _check_reported(line, output, "dispatch: exchanging edges and features (phase 1 of 1)", seconds)
    assert not (c.hosts[0].workdir / "out" / "comm.json").exists()


def test_a_killed_process_while_training_is_found(cluster, tmp_path):
    """The closed connection reaches the survivor's gradient all-reduce at once; the heartbeat still names
    the rank, its host and what it was doing."""
    c = cluster(2)
    mine = spread(_partitions(tmp_path), c, [[0], [1]])
    seconds, line, output = faulted(
        c,
        ["train", "--part-config", mine, *FAST, "--batch-size", "64", "--epochs", "5"],
        "kill",
        "training epoch 1, batch 3",
    )
    _check_reported(line, output, "training epoch 1, batch 3", seconds)

"""Training and embedding across emulated hosts, each holding only its own partitions, under each launcher:
the result must be the one the same run gives on one host (training is deterministic for a given rank
count, so the losses and accuracy agree to the last digit and the embeddings to 1e-5)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from graphshard import partition_graph
from graphshard.datasets import community_graph, hetero_graph, save_dataset

from .jobs import finish, spread, start

FAST = ["--fanouts", "5,5", "--batch-size", "256", "--hidden", "16", "--timeout", "60"]


def _partitions(tmp_path: Path, parts: int = 2) -> Path:
    ds = community_graph(num_nodes=3000, num_classes=4, avg_degree=8, feat_dim=16, noise=4.0, seed=2)
    partition_graph(ds.graph, "comm", parts, tmp_path / "parts", part_method="metis")
    return tmp_path / "parts" / "comm.json"


def _metrics(path: Path) -> dict:
    m = json.loads(path.read_text())
    assert m["complete"] is True
    return m


def _same_run(a: dict, b: dict) -> None:
    assert [e["train_loss"] for e in a["epochs"]] == pytest.approx([e["train_loss"] for e in b["epochs"]], rel=1e-6)
    assert a["test_acc"] == pytest.approx(b["test_acc"], abs=1e-9)


def test_node_training_and_embed_across_two_hosts_equal_one_host(cluster, tmp_path):
    c = cluster(2)
    config = _partitions(tmp_path)
    mine = spread(config, c, [[0], [1]])
    spread(config, c, [[0, 1], []], sub="all")  # the reference: every partition on host 0
    train = ["train", *FAST, "--epochs", "3", "--metrics-out", "metrics.json", "--checkpoint", "ckpt"]
    finish(start(c, [*train[:1], "--part-config", "all/comm.json", *train[1:]], per_host=2, hosts=1, name="one"))
    one = _metrics(c.hosts[0].workdir / "metrics.json")
    finish(start(c, ["embed", "--part-config", "all/comm.json", "--checkpoint", "ckpt", "--out", "one.npy",
                     "--timeout", "60"], per_host=2, hosts=1, name="embed-one"))
    for h in c.hosts:  # the one-host run's files are not the cross-host run's
        (h.workdir / "metrics.json").unlink(missing_ok=True)
    shutil.rmtree(c.hosts[0].workdir / "ckpt")
    finish(start(c, ["train", "--part-config", mine, *train[1:]], name="two"))
    _same_run(_metrics(c.hosts[0].workdir / "metrics.json"), one)
    held = sorted(str(p.relative_to(c.hosts[1].workdir)) for p in (c.hosts[1].workdir / "ckpt").glob("**/rank*"))
    assert held == ["ckpt/best/rank1", "ckpt/rank1"]  # each host writes and reads only its own ranks' part
    finish(start(c, ["embed", "--part-config", mine, "--checkpoint", "ckpt", "--out", "two.npy", "--timeout", "60"],
                 name="embed-two"))
    two, ref = (np.load(c.hosts[0].workdir / f, allow_pickle=False) for f in ("two.npy", "one.npy"))
    assert two.shape == (3000, 4)
    np.testing.assert_allclose(two, ref, atol=1e-5)

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
# Hosts of two cores each (both hosts on this machine's two), so the one-host reference runs do not put all
# their ranks on one core; every rank still runs one intra-op thread, as it did with a core a host.
CORES = 2
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


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
    c = cluster(2, cores_per_host=CORES)
    config = _partitions(tmp_path)
    mine = spread(config, c, [[0], [1]])
    spread(config, c, [[0, 1], []], sub="all")  # the reference: every partition on host 0
    train = ["train", *FAST, "--epochs", "3", "--metrics-out", "metrics.json", "--checkpoint", "ckpt"]
    finish(
        start(
            c,
            [*train[:1], "--part-config", "all/comm.json", *train[1:]],
            per_host=2,
            hosts=1,
            name="one",
            env=ONE_THREAD,
        )
    )
    one = _metrics(c.hosts[0].workdir / "metrics.json")
    finish(
        start(
            c,
            ["embed", "--part-config", "all/comm.json", "--checkpoint", "ckpt", "--out", "one.npy", "--timeout", "60"],
            per_host=2,
            hosts=1,
            name="embed-one",
            env=ONE_THREAD,
        )
    )
    for h in c.hosts:  # the one-host run's files are not the cross-host run's
        (h.workdir / "metrics.json").unlink(missing_ok=True)
    shutil.rmtree(c.hosts[0].workdir / "ckpt")
    finish(start(c, ["train", "--part-config", mine, *train[1:]], name="two", env=ONE_THREAD))
    _same_run(_metrics(c.hosts[0].workdir / "metrics.json"), one)
    held = sorted(str(p.relative_to(c.hosts[1].workdir)) for p in (c.hosts[1].workdir / "ckpt").glob("**/rank*"))
    assert held == ["ckpt/best/rank1", "ckpt/rank1"]  # each host writes and reads only its own ranks' part
    finish(
        start(
            c,
            ["embed", "--part-config", mine, "--checkpoint", "ckpt", "--out", "two.npy", "--timeout", "60"],
            name="embed-two",
            env=ONE_THREAD,
        )
    )
    two, ref = (np.load(c.hosts[0].workdir / f, allow_pickle=False) for f in ("two.npy", "one.npy"))
    assert two.shape == (3000, 4)
    np.testing.assert_allclose(two, ref, atol=1e-5)


def _one_host_and_across(
    c, config: Path, args: list[str], how: str, per_host: int = 1, also: tuple[Path, ...] = ()
) -> tuple[dict, dict]:
    """Train ``args`` on every partition on host 0 alone, then across the hosts, each holding only the
    partitions its ranks serve (launcher ``how``, ``per_host`` ranks a host); both runs' metrics."""
    n, world = len(c.hosts), len(c.hosts) * per_host
    parts = json.loads(config.read_text())["num_parts"]
    spread(config, c, [list(range(h * parts // n, (h + 1) * parts // n)) for h in range(n)], also=also)
    spread(config, c, [list(range(parts))] + [[] for _ in range(n - 1)], sub="all", also=also)
    for name, cfg, ranks, hosts in (("one", "all", world, 1), ("across", "parts", per_host, n)):
        run = [a.replace("{dir}", cfg) for a in args]
        finish(
            start(
                c,
                ["train", "--part-config", f"{cfg}/{config.name}", *run, "--metrics-out", f"{name}.json"],
                per_host=ranks,
                hosts=hosts,
                how=how,
                name=name,
                env=ONE_THREAD,
            )
        )
    return tuple(_metrics(c.hosts[0].workdir / f"{name}.json") for name in ("one", "across"))


def test_heterogeneous_node_training_under_slurm(cluster, tmp_path):
    from graphshard.train.run import partition_dataset

    ds = hetero_graph(num_papers=1200, num_authors=500, num_institutions=20, num_fields=10, noise=6.0, seed=3)
    save_dataset(ds, tmp_path / "data")
    config, _ = partition_dataset(str(tmp_path / "data"), str(tmp_path / "p"), 2)
    c = cluster(2, cores_per_host=CORES)
    one, across = _one_host_and_across(c, Path(config), [*FAST, "--epochs", "2"], "slurm")
    _same_run(across, one)
    assert across["world_size"] == 2


def test_link_prediction_under_a_pytorchjob_environment(cluster, tmp_path):
    from graphshard.train.run import partition_dataset

    ds = community_graph(num_nodes=2000, num_classes=4, avg_degree=8, feat_dim=16, noise=4.0, seed=4)
    save_dataset(ds, tmp_path / "data")
    config, split = partition_dataset(str(tmp_path / "data"), str(tmp_path / "p"), 2, link=True)
    c = cluster(2, cores_per_host=CORES)
    args = [*FAST, "--epochs", "2", "--task", "link", "--link-split", "{dir}/" + Path(split).name, "--filtered"]
    one, across = _one_host_and_across(c, Path(config), args, "env", also=(Path(split),))
    assert [e["train_loss"] for e in across["epochs"]] == pytest.approx(
        [e["train_loss"] for e in one["epochs"]], rel=1e-6
    )
    assert across["test_mrr"] == pytest.approx(one["test_mrr"], abs=1e-9)
    assert across["test_auc"] > 0.6


def test_two_hosts_of_two_ranks(cluster, tmp_path):
    c = cluster(2, cores_per_host=CORES)
    one, across = _one_host_and_across(
        c, _partitions(tmp_path, parts=4), [*FAST, "--epochs", "2"], "torchrun", per_host=2
    )
    _same_run(across, one)
    assert across["world_size"] == 4


def test_a_host_without_its_partition_is_named_before_training(cluster, tmp_path):
    c = cluster(2)
    config = _partitions(tmp_path)
    mine = spread(config, c, [[0], [1]])
    (c.hosts[1].workdir / "parts" / "part1" / "graph.safetensors").unlink()
    procs = start(c, ["train", "--part-config", mine, *FAST, "--epochs", "1"], name="missing")
    for p in procs:
        assert p.wait(120) != 0
        last = [ln for ln in p.output().splitlines() if ln.startswith("graphshard: error:")]
        assert last and "host 198.18.0.2 (rank1) lacks partition 1, which it must serve: " in last[-1], p.tail()
        assert "part1/graph.safetensors is missing" in last[-1]
        assert "epoch" not in p.output()  # stopped before any training


def test_heterogeneous_link_prediction_across_hosts(cluster, tmp_path):
    from graphshard.train.run import partition_dataset

    ds = hetero_graph(num_papers=1200, num_authors=500, num_institutions=20, num_fields=10, seed=5)
    save_dataset(ds, tmp_path / "data")
    config, split = partition_dataset(
        str(tmp_path / "data"), str(tmp_path / "p"), 2, link=True, edge_type="author:writes:paper"
    )
    c = cluster(2, cores_per_host=CORES)
    args = [*FAST, "--epochs", "2", "--task", "link", "--link-split", "{dir}/" + Path(split).name]
    one, across = _one_host_and_across(c, Path(config), args, "torchrun", also=(Path(split),))
    assert across["edge_type"] == ["author", "writes", "paper"]
    assert [e["train_loss"] for e in across["epochs"]] == pytest.approx(
        [e["train_loss"] for e in one["epochs"]], rel=1e-6
    )
    assert across["test_mrr"] == pytest.approx(one["test_mrr"], abs=1e-9)

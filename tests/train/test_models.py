"""Every built-in model trains across 2 ranks and 2 partitions and learns (the loss falls, test accuracy
is far above the majority class); its layer-wise outputs are checked against PyG elsewhere
(tests/infer). The models run one after another in one launched job, to save process start-ups."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from graphshard import Graph, partition_graph
from graphshard.datasets import community_graph, hetero_graph
from graphshard.distributed.launcher import launch
from graphshard.train import TrainOptions
from graphshard.train.contract import resolve_data

HOMOGENEOUS = {"sage": {}, "gcn": {}, "gat": {"heads": 2}, "gin": {}, "mlp": {}, "gat-edge": {"edge_feat": "w"},
               "gine": {"edge_feat": "w"}}
HETEROGENEOUS = {"rsage": {}, "rgcn": {}, "rgat": {"heads": 2}, "hgt": {"heads": 2}, "mlp": {}}


def _rank(runs: list[tuple[str, TrainOptions]], out: str) -> None:
    from graphshard.distributed.runtime import session
    from graphshard.train.node import train_node

    with session(timeout=120) as s:
        results = {name: train_node(s, opts) for name, opts in runs}
        if s.rank == 0:
            with open(out, "w") as f:
                json.dump(results, f)


def _train_all(config: str, models: dict[str, dict], tmp_path, **kw) -> dict[str, dict]:
    base = TrainOptions(part_config=config, progress=False, timeout=120, **kw)
    runs = [(name, resolve_data(replace(base, model=name.split("-")[0].replace("gine", "gin"), **extra), 2,
                                announce=False)) for name, extra in models.items()]
    out = str(tmp_path / "metrics.json")
    launch(_rank, 2, (runs, out), timeout=600)
    return json.loads(open(out).read())


def _learnt(metrics: dict, majority: float, name: str) -> None:
    losses = [e["train_loss"] for e in metrics["epochs"]]
    assert losses[-1] < losses[0], (name, losses)
    assert metrics["test_acc"] > majority + 0.15, (name, metrics["test_acc"], majority)


def test_every_homogeneous_model_learns_across_two_ranks(tmp_path):
    ds = community_graph(num_nodes=1200, num_classes=4, avg_degree=8, noise=3.0, seed=5)
    g = ds.graph
    src, dst = g.edges[("_N", "_E", "_N")]
    w = np.random.default_rng(0).random(src.shape[0]).astype(np.float32)
    graph = Graph.from_arrays(src, dst, g.num_nodes["_N"], node_feats=dict(g.node_feats["_N"]), edge_feats={"w": w})
    partition_graph(graph, "g", 2, tmp_path / "p", part_method="metis")
    labels = g.node_feats["_N"]["label"]
    majority = np.bincount(labels).max() / labels.size
    results = _train_all(str(tmp_path / "p" / "g.json"), HOMOGENEOUS, tmp_path, fanouts=[5, 5], batch_size=64,
                         epochs=8, hidden=16)
    for name, metrics in results.items():
        print(name, [round(e["train_loss"], 3) for e in metrics["epochs"]], metrics["test_acc"], majority)
    for name, metrics in results.items():
        if name != "mlp":  # features alone carry the label less well: the graph models must do better
            _learnt(metrics, majority, name)


def test_every_heterogeneous_model_learns_across_two_ranks(tmp_path):
    ds = hetero_graph(num_papers=1500, num_authors=600, num_institutions=20, num_fields=10, seed=3)
    partition_graph(ds.graph, "g", 2, tmp_path / "p", part_method="random")
    labels = ds.graph.node_feats["paper"]["label"]
    majority = np.bincount(labels).max() / labels.size
    results = _train_all(str(tmp_path / "p" / "g.json"), HETEROGENEOUS, tmp_path, fanouts=[5, 5], batch_size=64,
                         epochs=8, hidden=16)
    for name, metrics in results.items():
        print(name, [round(e["train_loss"], 3) for e in metrics["epochs"]], metrics["test_acc"], majority)
    for name, metrics in results.items():
        if name != "mlp":
            _learnt(metrics, majority, name)

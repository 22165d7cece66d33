"""Edge classification and regression (``--task edge``) end to end on 2 ranks x 2 partitions, homogeneous and
heterogeneous: the reported test metrics equal scikit-learn's on predictions the test makes itself (the saved
node outputs of the selected epoch, decoded by the checkpoint's decoder, for the dataset's test edges in
original IDs), and the figures are those of plain full-batch PyG on the same planted edge labels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from graphshard.datasets import community_graph, hetero_graph, save_dataset
from graphshard.errors import InputError
from graphshard.models.edge import edge_decoder
from graphshard.tasks.checkpoint import read_weights
from graphshard.train import TrainOptions, train
from tests.train.plain_pyg import full_batch_edges, scores

KW = dict(fanouts=[10, 10], batch_size=256, epochs=15, progress=False, task="edge")  # ~210 steps


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("edges")
    for kind in ("classes", "regression"):
        save_dataset(community_graph(num_nodes=1500, avg_degree=8, noise=4.0, seed=7, edge_targets=kind), root / kind)
    save_dataset(hetero_graph(1500, 600, 40, 20, noise=4.0, seed=7, edge_targets="classes"), root / "hetero")
    return root


def _run(root: Path, name: str, tmp: Path, **kw) -> tuple[dict, np.ndarray, np.ndarray]:
    """2 x 2 on dataset ``name`` with checkpoints: the metrics, the test edges' outputs decoded here from the
    saved node outputs with the checkpoint's decoder, and their labels."""
    opts = TrainOptions(**{**KW, **kw}, save_embeddings=str(tmp / "out"), checkpoint=str(tmp / "ckpt"))
    m = train(opts, num_procs=2, dataset=str(root / name), work_dir=str(tmp / "work"))
    hetero = name == "hetero"
    d = root / name
    if hetero:
        h = np.load(tmp / "out" / "paper.npy")
        edges, prefix = np.load(d / "edges" / "paper__cites__paper.npy"), d / "edges" / "paper__cites__paper_"
    else:
        h = np.load(tmp / "out")
        edges, prefix = np.stack([np.load(d / "src.npy"), np.load(d / "dst.npy")]), d / "edge_"
    test, labels = np.load(f"{prefix}test_idx.npy"), np.load(f"{prefix}label.npy")
    weights = read_weights(tmp / "ckpt" / "best" / "rank0") or read_weights(tmp / "ckpt" / "rank0")
    assert weights is not None and weights[0] == m["best_epoch"]
    width = int(labels.max()) + 1 if labels.dtype.kind == "i" else 1
    decoder = edge_decoder(kw.get("edge_decoder", "concat"), 64, 0, 64, out_dim=width)
    decoder.load_state_dict({k[len("decoder.") :]: v for k, v in weights[1].items() if k.startswith("decoder.")})
    with torch.no_grad():
        out = decoder(torch.from_numpy(h[edges[0, test]]), torch.from_numpy(h[edges[1, test]])).numpy()
    return m, out, labels[test]


def test_edge_classification(planted, tmp_path):
    m, out, labels = _run(planted, "classes", tmp_path, epochs=30, metric=["f1_macro", "accuracy", "roc_auc"])
    assert m["task"] == "edge" and m["label_kind"] == "classification" and m["edge_type"] == ["_N", "_E", "_N"]
    expected = scores("classification", out, labels)
    for k in ("f1_macro", "accuracy"):
        assert m["test_metrics"][k] == pytest.approx(expected[k], abs=1e-6), k
    reference = full_batch_edges(planted / "classes", "classification", "f1_macro", epochs=150)
    assert m["test_metrics"]["f1_macro"] >= reference["f1_macro"] - 0.02, (m["test_metrics"], reference)


def test_edge_regression(planted, tmp_path):
    m, out, labels = _run(planted, "regression", tmp_path)
    assert m["label_kind"] == "regression" and list(m["test_metrics"]) == ["rmse", "mae", "r2"]
    expected = scores("regression", out, labels)
    for k in ("rmse", "mae", "r2"):
        assert m["test_metrics"][k] == pytest.approx(expected[k], abs=1e-6), k
    reference = full_batch_edges(planted / "regression", "regression", "rmse", epochs=150)
    assert m["test_metrics"]["rmse"] <= 1.05 * reference["rmse"], (m["test_metrics"], reference)


def test_heterogeneous_edge_classification_with_distmult(planted, tmp_path):
    m, out, labels = _run(planted, "hetero", tmp_path, edge_decoder="distmult", metric=["f1_macro", "accuracy"])
    assert m["edge_type"] == ["paper", "cites", "paper"]
    expected = scores("classification", out, labels)
    for k in ("f1_macro", "accuracy"):
        assert m["test_metrics"][k] == pytest.approx(expected[k], abs=1e-6), k
    assert m["test_metrics"]["accuracy"] > 0.7


def test_edge_tasks_are_checked_before_spawning(planted, tmp_path):
    run = dict(num_procs=2, work_dir=str(tmp_path))
    with pytest.raises(InputError, match="--edge-decoder dot gives one number per edge"):
        train(TrainOptions(**KW, edge_decoder="dot"), dataset=str(planted / "classes"), **run)
    with pytest.raises(InputError, match="edge types with labels .*: none; an edge task needs edge labels"):
        save_dataset(community_graph(num_nodes=300, seed=1), tmp_path / "plain")
        train(TrainOptions(**KW), dataset=str(tmp_path / "plain"), **run)
    with pytest.raises(InputError, match="'rmse' is not a metric of classification"):
        train(TrainOptions(**KW, metric=["rmse"]), dataset=str(planted / "classes"), **run)
    bad = community_graph(num_nodes=300, avg_degree=8, seed=2, edge_targets="regression")
    src, dst = bad.graph.edges[("_N", "_E", "_N")]
    label = bad.graph.edge_feats[("_N", "_E", "_N")]["label"]
    label[5] = np.nan  # every edge is in a split
    save_dataset(bad, tmp_path / "nan")
    with pytest.raises(
        Exception, match=rf"edge \({src[5]}, {dst[5]}\) of _N:_E:_N \(original node IDs\).*nan is not finite"
    ):
        train(TrainOptions(**KW), dataset=str(tmp_path / "nan"), **run)


def test_edge_labels_go_through_the_chunked_format_and_dispatch(planted, tmp_path):
    """chunk -> assign -> dispatch carries the edge labels and splits: an edge run on what dispatch wrote learns
    them (the planted classes: far above the 84 % of the majority class)."""
    from graphshard.cli import main

    chunked, assigned, parts = (str(tmp_path / n) for n in ("chunked", "assigned", "parts"))
    assert main(["chunk", "--dataset", str(planted / "classes"), "--out", chunked, "--num-chunks", "2"]) == 0
    assert main(["assign", "--dataset", chunked, "--num-parts", "2", "--out", assigned]) == 0
    assert main(["dispatch", "--dataset", chunked, "--assignment", assigned, "--out", parts, "--num-procs", "2"]) == 0
    opts = TrainOptions(**{**KW, "epochs": 10}, part_config=f"{parts}/community.json", metric=["accuracy"])
    m = train(opts, num_procs=2)
    assert m["test_metrics"]["accuracy"] > 0.9, m["test_metrics"]

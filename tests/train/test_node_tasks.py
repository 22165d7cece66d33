"""Node regression and multi-label classification end to end on 2 ranks x 2 partitions, homogeneous and
heterogeneous: the reported test metrics equal scikit-learn's on the saved outputs of the test nodes, and the
figures are those of plain full-batch PyG on the same planted targets (within 5 % RMSE, 0.02 F1)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from graphshard.datasets import community_graph, hetero_graph, save_dataset
from graphshard.errors import InputError
from graphshard.train import TrainOptions, train
from tests.train.plain_pyg import full_batch, scores

KW = dict(fanouts=[10, 10], batch_size=256, epochs=50, progress=False)  # ~200 steps, as the reference's 200


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("planted")
    for targets in ("regression", "multilabel"):
        save_dataset(community_graph(num_nodes=3000, noise=4.0, seed=5, targets=targets), root / targets)
        save_dataset(hetero_graph(1500, 600, 40, 20, noise=4.0, seed=5, targets=targets), root / f"hetero_{targets}")
    return root


def _run(root: Path, name: str, tmp_path: Path, **kw) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    """2 x 2 on dataset ``name``: the metrics, the saved outputs, the labels and the test nodes."""
    out = tmp_path / "out"
    m = train(
        TrainOptions(**{**KW, **kw}, save_embeddings=str(out), metrics_out=str(tmp_path / "m.json")),
        num_procs=2,
        dataset=str(root / name),
        work_dir=str(tmp_path / "work"),
    )
    hetero = name.startswith("hetero")
    outputs = np.load(out / "paper.npy") if hetero else np.load(out)
    prefix = "paper_" if hetero else ""
    labels, test = np.load(root / name / f"{prefix}label.npy"), np.load(root / name / f"{prefix}test_idx.npy")
    assert json.loads((tmp_path / "m.json").read_text())["test_metrics"] == m["test_metrics"]
    return m, outputs, labels, test


@pytest.mark.parametrize("name", ["regression", "hetero_regression"])
def test_regression(planted, tmp_path, name):
    m, outputs, labels, test = _run(planted, name, tmp_path)
    assert m["label_kind"] == "regression" and list(m["test_metrics"]) == ["rmse", "mae", "r2"]
    expected = scores("regression", outputs[test], labels[test])
    for k in ("rmse", "mae", "r2"):
        assert m["test_metrics"][k] == pytest.approx(expected[k], abs=1e-6), k
        assert m[f"test_{k}"] == m["test_metrics"][k]  # the flat keys as well
    assert m["test_metrics"]["r2"] > 0.5  # the planted signal is learnt
    if name == "regression":
        reference = full_batch(planted / name, "regression", "rmse")
        assert m["test_metrics"]["rmse"] <= 1.05 * reference["rmse"], (m["test_metrics"], reference)


@pytest.mark.parametrize("name", ["multilabel", "hetero_multilabel"])
def test_multilabel(planted, tmp_path, name):
    m, outputs, labels, test = _run(planted, name, tmp_path, metric=["f1_micro", "f1_macro", "accuracy", "roc_auc"])
    assert m["label_kind"] == "multilabel"
    expected = scores("multilabel", outputs[test], labels[test])
    for k in ("f1_micro", "f1_macro", "accuracy", "roc_auc"):
        assert m["test_metrics"][k] == pytest.approx(expected[k], abs=1e-6), k
    if name == "multilabel":
        reference = full_batch(planted / name, "multilabel", "f1_micro")
        for k in ("f1_micro", "f1_macro"):
            assert m["test_metrics"][k] >= reference[k] - 0.02, (k, m["test_metrics"], reference)


def test_classification_metrics_and_weights(planted, tmp_path):
    """Classes with focal loss and balanced weights: F1 and ROC-AUC equal scikit-learn's; accuracy keeps its
    keys of earlier releases."""
    save_dataset(community_graph(num_nodes=3000, noise=4.0, seed=5), tmp_path / "classes")
    m, outputs, labels, test = _run(
        tmp_path,
        "classes",
        tmp_path,
        epochs=4,
        metric=["f1_macro", "accuracy"],
        loss="focal",
        class_weights="auto",
    )
    expected = scores("classification", outputs[test], labels[test])
    assert m["test_metrics"]["f1_macro"] == pytest.approx(expected["f1_macro"], abs=1e-6)
    assert m["test_acc"] == m["test_metrics"]["accuracy"] == pytest.approx(expected["accuracy"], abs=1e-6)
    assert m["test_acc"] > 0.8


def test_label_problems_named_before_training(planted, tmp_path):
    with pytest.raises(InputError, match="'rmse' is not a metric of multilabel"):
        train(
            TrainOptions(**KW, metric=["rmse"]),
            num_procs=2,
            dataset=str(planted / "multilabel"),
            work_dir=str(tmp_path),
        )
    with pytest.raises(InputError, match="--loss cross_entropy does not fit regression"):
        train(
            TrainOptions(**KW, loss="cross_entropy"),
            num_procs=2,
            dataset=str(planted / "regression"),
            work_dir=str(tmp_path),
        )
    bad = community_graph(num_nodes=400, seed=1, targets="multilabel")
    bad.graph.node_feats["_N"]["label"][7, 2] = 3  # every node of the graph is in a split
    save_dataset(bad, tmp_path / "bad")
    with pytest.raises(Exception, match=r"'_N' node 7 \(original ID.*column 2: 3 is not 0 or 1"):
        train(TrainOptions(**KW), num_procs=2, dataset=str(tmp_path / "bad"), work_dir=str(tmp_path))

"""Evaluation metrics against scikit-learn: computed from every rank's predictions together (3 ranks, one of
them with no items), never averaged over ranks; the metric names, their directions and the label kinds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn import metrics as sk
from sklearn.preprocessing import label_binarize

from graphshard.distributed.ranks.launcher import launch
from graphshard.errors import InputError
from graphshard.tasks.labels import kind_of, problem
from graphshard.tasks.loop import best_epoch
from graphshard.tasks.metrics import chosen_metrics, compute, exact_metrics, higher_is_better, rows_needed

N, C = 400, 5


def _data(kind: str, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Outputs with some signal, and targets, of ``N`` items."""
    rng = np.random.default_rng(seed)
    if kind == "classification":
        y = rng.integers(0, C, N)
        scores = rng.normal(size=(N, C)) + 1.5 * np.eye(C)[y]
        return torch.tensor(scores, dtype=torch.float32), torch.from_numpy(y)
    if kind == "multilabel":
        y = (rng.random((N, C)) < 0.3).astype(np.float32)
        return torch.tensor(rng.normal(size=(N, C)) + 2 * y - 1, dtype=torch.float32), torch.from_numpy(y)
    y = rng.normal(size=(N, 3)).astype(np.float32)
    return torch.from_numpy(y + 0.4 * rng.normal(size=(N, 3)).astype(np.float32)), torch.from_numpy(y)


def _sklearn(kind: str, name: str, scores: torch.Tensor, y: torch.Tensor) -> float:
    s, t = scores.numpy().astype(np.float64), y.numpy()
    if kind == "regression":
        return {
            "rmse": sk.root_mean_squared_error(t, s),
            "mae": sk.mean_absolute_error(t, s),
            "r2": sk.r2_score(t, s),
        }[name]
    if kind == "multilabel":
        prob, pred = 1 / (1 + np.exp(-s)), (s > 0).astype(int)
        return {
            "accuracy": sk.accuracy_score(t, pred),
            "f1_micro": sk.f1_score(t, pred, average="micro"),
            "f1_macro": sk.f1_score(t, pred, average="macro"),
            "roc_auc": sk.roc_auc_score(t, prob, average="macro"),
            "pr_auc": sk.average_precision_score(t, prob, average="macro"),
        }[name]
    prob = np.exp(s - s.max(1, keepdims=True))
    prob /= prob.sum(1, keepdims=True)
    pred = s.argmax(1)
    return {
        "accuracy": sk.accuracy_score(t, pred),
        "f1_micro": sk.f1_score(t, pred, average="micro"),
        "f1_macro": sk.f1_score(t, pred, average="macro"),
        "roc_auc": sk.roc_auc_score(t, prob, multi_class="ovr", average="macro"),
        "pr_auc": sk.average_precision_score(label_binarize(t, classes=range(C)), prob, average="macro"),
    }[name]


KINDS = {
    "classification": ["accuracy", "f1_micro", "f1_macro", "roc_auc", "pr_auc"],
    "multilabel": ["accuracy", "f1_micro", "f1_macro", "roc_auc", "pr_auc"],
    "regression": ["rmse", "mae", "r2"],
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_metric_equals_scikit_learn(kind):
    scores, y = _data(kind)
    for names in (KINDS[kind], KINDS[kind][:2]):  # the predicted class alone, or the scores, travel
        got = compute(kind, names, rows_needed(kind, names, scores, y), C if kind != "regression" else 3)
        for name in names:
            assert got[name] == pytest.approx(_sklearn(kind, name, scores, y), abs=1e-6), (kind, name)


def _rank_share(kind: str, out: str) -> None:
    """Rank r of 3 evaluates an uneven share of the items (rank 1 none) and writes what exact_metrics gave."""
    import os

    from graphshard.distributed.runtime.session import session

    scores, y = _data(kind)
    rank = int(os.environ["RANK"])
    lo, hi = [(0, 90), (90, 90), (90, N)][rank]
    with session(timeout=60) as s:
        got = exact_metrics(
            s.ctx, kind, KINDS[kind], scores[lo:hi], targets=y[lo:hi], classes=3 if kind == "regression" else C
        )
    Path(f"{out}.{rank}").write_text(json.dumps(got))


@pytest.mark.parametrize("kind", ["classification", "multilabel", "regression"])
def test_metrics_of_every_rank_together(tmp_path, kind):
    launch(_rank_share, 3, (kind, str(tmp_path / "got")), timeout=120)
    scores, y = _data(kind)
    told = [json.loads(Path(f"{tmp_path / 'got'}.{r}").read_text()) for r in range(3)]
    assert told[0] == told[1] == told[2]  # every rank holds the same values
    for name in KINDS[kind]:
        assert told[0][name] == pytest.approx(_sklearn(kind, name, scores, y), abs=1e-6), name
    # not the mean of the ranks' own metrics: the shares give other values
    parts = [_sklearn(kind, KINDS[kind][1], scores[a:b], y[a:b]) for a, b in ((0, 90), (90, N))]
    assert abs(np.mean(parts) - told[0][KINDS[kind][1]]) > 1e-4


def test_no_items_gives_no_value():
    assert compute("regression", ["rmse"], np.zeros((0, 2), np.float32), 1) == {"rmse": None}


def test_metric_names_and_directions():
    assert chosen_metrics(None, "regression") == ["rmse", "mae", "r2"]
    assert chosen_metrics(["f1_macro", "accuracy", "f1_macro"], "classification") == ["f1_macro", "accuracy"]
    with pytest.raises(InputError, match="'rmse' is not a metric of classification"):
        chosen_metrics(["rmse"], "classification")
    assert not higher_is_better("val_rmse") and not higher_is_better("mae") and higher_is_better("val_r2")
    history = [{"epoch": 0, "val_rmse": 0.5}, {"epoch": 1, "val_rmse": 0.4}, {"epoch": 2, "val_rmse": 0.45}]
    assert best_epoch(history, "val_rmse") == 1
    assert best_epoch([{**r, "val_r2": -r["val_rmse"]} for r in history], "val_r2") == 1


def test_label_kinds_from_dtype_and_shape():
    assert kind_of(True, (), None, "l") == "classification"
    assert kind_of(True, (1,), None, "l") == "classification"  # one column of classes, as OGB stores them
    assert kind_of(True, (4,), None, "l") == "multilabel"
    assert kind_of(False, (), None, "l") == "regression"
    assert kind_of(False, (3,), None, "l") == "regression"
    assert kind_of(True, (), "regression", "l") == "regression"  # integer ratings as targets
    assert kind_of(False, (4,), "multilabel", "l") == "multilabel"
    with pytest.raises(InputError, match="multilabel needs a 2-D"):
        kind_of(True, (), "multilabel", "l")
    with pytest.raises(InputError, match="classification needs one class per item"):
        kind_of(True, (4,), "classification", "l")
    assert problem("multilabel", np.array([[0, 1], [1, 2]])).position == 1
    assert "column 1: 2 is not 0 or 1" in problem("multilabel", np.array([[0, 1], [1, 2]])).why
    assert problem("regression", np.array([0.5, np.nan], np.float32)).position == 1
    assert problem("regression", np.array([0.5, 1.0], np.float32)) is None

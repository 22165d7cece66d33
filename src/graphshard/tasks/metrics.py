"""Evaluation metrics of node and edge tasks, computed by torchmetrics from every rank's predictions.

A metric is never the mean of per-rank metrics (a macro F1 or a ROC-AUC of parts is not the part of the
whole): each rank sends what the metric needs of its evaluated items — the predicted class, or the scores
when a ranking metric (ROC-AUC, PR-AUC) is asked, and the targets — to rank 0, which computes every metric on
all of them and hands the values to every rank (one all-reduce of a few floats). What travels is
``O(evaluated items)`` rows of a few numbers, once per evaluation, and is held by rank 0 alone.

Names (what ``--metric`` takes; ``val_<name>`` / ``test_<name>`` in the metrics): ``accuracy`` (multi-label:
every label of the item right), ``f1_micro``, ``f1_macro``, ``roc_auc`` and ``pr_auc`` (macro over the classes
or labels, one-vs-rest), ``rmse``, ``mae`` and ``r2`` (averaged over the target's columns). The first metric
named selects the best epoch: the highest, or the lowest for ``rmse`` and ``mae``."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence

import numpy as np
import torch

from ..distributed.ranks.collectives import all_reduce_sum, exchange
from ..distributed.ranks.context import DistContext
from ..errors import InputError

log = logging.getLogger(__name__)

CLASS_METRICS = ("accuracy", "f1_micro", "f1_macro", "roc_auc", "pr_auc")
REGRESSION_METRICS = ("rmse", "mae", "r2")
METRICS = {"classification": CLASS_METRICS, "multilabel": CLASS_METRICS, "regression": REGRESSION_METRICS}
DEFAULT_METRICS = {
    "classification": ("accuracy", "f1_macro"),
    "multilabel": ("f1_micro", "f1_macro"),
    "regression": ("rmse", "mae", "r2"),
}
LOWER_IS_BETTER = frozenset({"rmse", "mae"})
_RANKING = frozenset({"roc_auc", "pr_auc"})


def load_library() -> None:
    """Import torchmetrics' metrics now (about 50 MB and a second, once per process): at a rank's start, with
    the rest of what it loads, rather than at its first evaluation."""
    import torchmetrics.functional.classification
    import torchmetrics.functional.regression  # noqa: F401


def chosen_metrics(asked: Sequence[str] | None, kind: str, what: str = "--metric") -> list[str]:
    """The metrics reported for a task of label ``kind``: ``asked`` (checked against the kind's) or its
    defaults. Raises :class:`InputError` naming ``what`` and the metrics the kind has."""
    if not asked:
        return list(DEFAULT_METRICS[kind])
    unknown = [m for m in asked if m not in METRICS[kind]]
    if unknown:
        raise InputError(f"{what}: {unknown[0]!r} is not a metric of {kind} (choose from {', '.join(METRICS[kind])})")
    return list(dict.fromkeys(asked))


def higher_is_better(metric: str) -> bool:
    """Whether a larger value of ``metric`` (a name, or a record key ending in one: ``val_rmse``,
    ``val_ratings/rmse``) is better."""
    return not any(metric == m or metric.endswith((f"_{m}", f"/{m}")) for m in LOWER_IS_BETTER)


def rows_needed(kind: str, names: Sequence[str], scores: torch.Tensor, targets: torch.Tensor) -> np.ndarray:
    """What the metrics ``names`` need of some items, one row each: their predicted class and target
    (int64), or their scores (probabilities) and targets (float32). The same columns on every rank."""
    n = targets.shape[0]
    if kind == "classification" and not _RANKING & set(names):
        pred = scores.argmax(1) if n else torch.zeros(0, dtype=torch.int64)
        return np.stack([pred.numpy(), targets.numpy()], axis=1).astype(np.int64)
    if kind == "classification":
        prob = torch.softmax(scores.float(), 1)
        return torch.cat([prob, targets.view(n, 1).float()], 1).numpy()
    if kind == "multilabel":
        scores = torch.sigmoid(scores.float())
    return torch.cat([_columns(scores.float()), _columns(targets.float())], 1).numpy()


def _columns(x: torch.Tensor) -> torch.Tensor:
    """``x`` as rows of columns (one column when it holds one value per item; empty ones too)."""
    return x.reshape(x.shape[0], x.shape[1] if x.dim() == 2 else 1)


def compute(kind: str, names: Sequence[str], rows: np.ndarray, classes: int) -> dict[str, float | None]:
    """The metrics ``names`` of all items, from their :func:`rows_needed` rows (``classes``: the class count,
    or the label's width). None where no item was evaluated."""
    if not rows.shape[0]:
        return dict.fromkeys(names)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out: dict[str, float | None] = {m: float(_metric(kind, m, torch.from_numpy(rows), classes)) for m in names}
    for w in seen:  # e.g. a label without a positive item: the metric's value says what it can
        log.warning("evaluation: %s", w.message)
    return out


def _metric(kind: str, name: str, rows: torch.Tensor, classes: int) -> torch.Tensor:
    import torchmetrics.functional.classification as tc
    import torchmetrics.functional.regression as tr

    if kind == "regression":
        width = rows.shape[1] // 2
        pred, target = rows[:, :width], rows[:, width:]
        if width == 1:
            pred, target = pred[:, 0], target[:, 0]
        if name == "rmse":
            return tr.mean_squared_error(pred, target, squared=False, num_outputs=width).mean()
        if name == "mae":
            return tr.mean_absolute_error(pred, target, num_outputs=width).mean()
        return tr.r2_score(pred, target, multioutput="uniform_average")
    if kind == "multilabel":
        prob, target = rows[:, :classes], rows[:, classes:].long()
        if name == "accuracy":
            return tc.multilabel_exact_match(prob, target, classes)
        if name in ("f1_micro", "f1_macro"):
            return tc.multilabel_f1_score(prob, target, classes, average="micro" if name == "f1_micro" else "macro")
        if name == "roc_auc":
            return tc.multilabel_auroc(prob, target, classes, average="macro", thresholds=None)
        return tc.multilabel_average_precision(prob, target, classes, average="macro", thresholds=None)
    if rows.shape[1] == 2 and rows.dtype == torch.int64:  # predicted class, target
        pred, target = rows[:, 0], rows[:, 1]
    else:
        pred, target = rows[:, :classes], rows[:, classes].long()
    if name == "accuracy":
        return tc.multiclass_accuracy(pred, target, classes, average="micro")
    if name in ("f1_micro", "f1_macro"):
        return tc.multiclass_f1_score(pred, target, classes, average="micro" if name == "f1_micro" else "macro")
    if name == "roc_auc":
        return tc.multiclass_auroc(pred, target, classes, average="macro", thresholds=None)
    return tc.multiclass_average_precision(pred, target, classes, average="macro", thresholds=None)


def exact_metrics(
    ctx: DistContext,
    kind: str,
    names: Sequence[str],
    scores: torch.Tensor,
    *,
    targets: torch.Tensor,
    classes: int,
    what: str = "evaluation",
) -> dict[str, float | None]:
    """The metrics ``names`` of every rank's items together (collective): this rank's ``scores`` (model outputs,
    one row per item) and ``targets`` go to rank 0, which computes them; every rank returns the same values."""
    rows = rows_needed(kind, names, scores.detach().cpu(), targets.cpu())
    send = [rows if r == 0 else rows[:0] for r in range(ctx.world_size)]
    got = exchange(ctx, send, f"{what} (predictions)")
    values = np.zeros(len(names) + 1)
    if ctx.rank == 0:
        found = compute(kind, names, np.concatenate(got), classes)
        values[:-1] = [np.nan if v is None else v for v in found.values()]
        values[-1] = sum(g.shape[0] for g in got)
    total = all_reduce_sum(ctx, values, f"{what} (metrics)")
    if not total[-1]:
        return dict.fromkeys(names)
    return {m: float(v) if np.isfinite(v) else None for m, v in zip(names, total[:-1])}

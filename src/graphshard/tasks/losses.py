"""The training loss of a node or edge task, by its label kind (:mod:`.labels`), and class weights.

- classification: ``cross_entropy`` (default) or ``focal``; class weights weigh each item by its class.
- multilabel: ``bce`` (binary cross-entropy on each label's logit; default) or ``focal``; class weights weigh
  each label's positives (``pos_weight``).
- regression: ``mse`` (default) or ``smooth_l1`` (Huber with beta 1: less pulled by outliers).

Focal loss (Lin et al., 2017) scales each item's cross-entropy by ``(1 - p_t) ** gamma``, ``p_t`` the
probability given to the right answer, so the many easy items count less than the few hard ones; with
class weights each term is also multiplied by its class's weight (``alpha``), and the mean is over items.

``--class-weights auto`` counts the training labels over every rank: a class's weight is
``items / (classes * items of the class)`` (scikit-learn's "balanced"; 0 for a class no training item has);
a label's positive weight is its negatives over its positives (1 where it has none). ``--class-weights
FILE``: a ``.npy`` of one non-negative weight per class (or label)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..distributed.ranks.collectives import all_reduce_sum
from ..distributed.ranks.context import DistContext
from ..errors import InputError
from ..format.npyfile import read_npy

LOSSES = ("auto", "cross_entropy", "focal", "bce", "mse", "smooth_l1")
KIND_LOSSES = {
    "classification": ("cross_entropy", "focal"),
    "multilabel": ("bce", "focal"),
    "regression": ("mse", "smooth_l1"),
}
Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (outputs, targets) -> the batch's loss


def chosen_loss(loss: str, kind: str) -> str:
    """``loss`` (``auto``: the kind's default) if it fits label ``kind``; else :class:`InputError`."""
    if loss == "auto":
        return KIND_LOSSES[kind][0]
    if loss not in KIND_LOSSES[kind]:
        raise InputError(f"--loss {loss} does not fit {kind} labels (choose from {', '.join(KIND_LOSSES[kind])})")
    return loss


def class_weights(
    ctx: DistContext, spec: str | None, kind: str, train_targets: np.ndarray, *, width: int
) -> torch.Tensor | None:
    """The weights ``spec`` asks for (None: none): ``auto`` from every rank's training targets (this rank's
    ``train_targets``; collective), or read from a file. ``width``: classes or labels."""
    if spec is None:
        return None
    if kind == "regression":
        raise InputError("--class-weights weighs classes or labels; regression targets have none")
    if spec != "auto":
        return torch.from_numpy(_read_weights(Path(spec), width))
    if kind == "classification":
        counts = np.bincount(train_targets.astype(np.int64), minlength=width).astype(np.float64)
        counts = all_reduce_sum(ctx, counts, "class weights")
        weights = np.where(counts > 0, counts.sum() / (width * np.maximum(counts, 1)), 0.0)
    else:
        sums = np.concatenate([train_targets.reshape(-1, width).sum(0), [train_targets.shape[0]]]).astype(np.float64)
        sums = all_reduce_sum(ctx, sums, "class weights")
        positives, items = sums[:-1], sums[-1]
        weights = np.where(positives > 0, (items - positives) / np.maximum(positives, 1), 1.0)
    return torch.from_numpy(weights.astype(np.float32))


def _read_weights(path: Path, width: int) -> np.ndarray:
    if not path.is_file():
        raise InputError(f"{path}: class weights file not found (give auto, or a .npy of {width} weights)")
    w = np.asarray(read_npy(path))
    if w.shape != (width,) or not np.issubdtype(w.dtype, np.number):
        raise InputError(
            f"{path}: class weights must be {width} numbers (one per class or label), got {w.dtype} {w.shape}"
        )
    bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if bad.size:
        raise InputError(f"{path}: position {int(bad[0])}: weight {w[bad[0]].item()!r} is not a finite number >= 0")
    return w.astype(np.float32)


def loss_function(kind: str, loss: str, weights: torch.Tensor | None = None, gamma: float = 2.0) -> Loss:
    """The loss ``loss`` (a name of :data:`KIND_LOSSES` for ``kind``) of outputs against targets, in fp32."""

    def fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        out = out.float()
        w = None if weights is None else weights.to(out.device)
        if kind == "regression":
            target = target.view(out.shape)
            return F.mse_loss(out, target) if loss == "mse" else F.smooth_l1_loss(out, target)
        if kind == "multilabel":
            if loss == "bce":
                return F.binary_cross_entropy_with_logits(out, target, pos_weight=w)
            return _sigmoid_focal(out, target, w, gamma)
        if loss == "cross_entropy":
            return F.cross_entropy(out, target, weight=w)
        return _softmax_focal(out, target, w, gamma)

    return fn


def _softmax_focal(out: torch.Tensor, target: torch.Tensor, w: torch.Tensor | None, gamma: float) -> torch.Tensor:
    log_p = F.log_softmax(out, 1).gather(1, target.view(-1, 1))[:, 0]
    term = -((1 - log_p.exp()) ** gamma) * log_p
    return (term * w[target] if w is not None else term).mean()


def _sigmoid_focal(out: torch.Tensor, target: torch.Tensor, w: torch.Tensor | None, gamma: float) -> torch.Tensor:
    ce = F.binary_cross_entropy_with_logits(out, target, reduction="none")
    p = torch.sigmoid(out)
    p_t = p * target + (1 - p) * (1 - target)
    term = ce * (1 - p_t) ** gamma
    if w is not None:  # positives weighed by their label's weight, as BCE's pos_weight does
        term = term * (1 + (w - 1) * target)
    return term.mean()


def task_loss(ctx: DistContext, opts: Any, kind: str, train_targets: np.ndarray, *, width: int) -> Loss:
    """The loss ``opts`` asks for a task of label ``kind`` (``--loss``, ``--class-weights``, ``--focal-gamma``),
    its class weights counted from every rank's ``train_targets`` (collective)."""
    weights = class_weights(ctx, opts.class_weights, kind, train_targets, width=width)
    return loss_function(kind, chosen_loss(opts.loss, kind), weights, opts.focal_gamma)

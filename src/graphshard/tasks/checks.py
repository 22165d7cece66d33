"""Checks before and during training: no NaN or infinite inputs or losses, no label outside the classes.

A run that trains on NaN features or diverges to a NaN loss would otherwise finish and report an
accuracy near chance; a label beyond the declared classes would silently widen the output layer.
The feature check is one vectorised pass over this rank's own rows at start-up (each rank checks its
partition, so together they check every row once); the loss is checked at every step before the
backward pass, so a bad value never reaches the weights.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ..distributed.runtime.graph import DistGraph
from ..errors import InputError
from ..sparse import CSRRows


def check_finite_features(g: DistGraph, feat_name: str = "feat") -> None:
    """Raise :class:`InputError` naming the first node (type, original ID) of this rank's partition whose
    ``feat_name`` row holds NaN or infinity."""
    book = g.get_partition_book()
    before: dict[str, int] = {}
    for key, x in ((k, x) for part in g.served.parts for k, x in part.node_feats.items()):
        ntype, name = key.rsplit("/", 1)
        offset = before.get(key, 0)  # rows of this type in the served partitions before this one
        before[key] = offset + x.shape[0]
        if name != feat_name:
            continue
        bad = _bad_rows(x)
        if bad is None:
            continue
        if bad.numel():
            row = offset + int(bad[0])
            start = book.node_range(g.part_id, ntype)[0]
            orig = int(book.to_original(ntype, torch.tensor([start + row]))[0])
            raise InputError(
                f"feature {feat_name!r} of {ntype!r} node {orig} (original ID) is not finite "
                f"({bad.shape[0]} such rows in partition {g.part_id}); fix the data, or pass "
                "--allow-nonfinite to train anyway"
            )


def check_loss(loss: torch.Tensor, epoch: int, step: int, rank: int) -> None:
    """Raise :class:`InputError` if the loss is NaN or infinite, naming the epoch, batch and rank."""
    value = float(loss.detach())
    if not np.isfinite(value):
        raise InputError(
            f"the training loss is {value} at epoch {epoch}, batch {step} (rank {rank}); "
            "lower --lr or check the features, or pass --allow-nonfinite to continue"
        )


LabelSummary = tuple[int, int, int]  # labelled nodes, largest label + 1 (0: none), smallest node with that label


def label_summary(ids: np.ndarray, labels: np.ndarray) -> LabelSummary:
    """What the class count needs of some split nodes ``ids`` (distinct) with ``labels``."""
    if not ids.size:
        return 0, 0, -1
    top = int(labels.max()) + 1
    return int(ids.size), top, int(ids[labels == top - 1].min())


def merge_summaries(summaries: list[LabelSummary]) -> LabelSummary:
    """The summary of disjoint sets of split nodes together."""
    used, top = sum(s[0] for s in summaries), max(s[1] for s in summaries)
    return used, top, min((s[2] for s in summaries if s[0] and s[1] == top), default=-1)


def classes_of(summary: LabelSummary, declared: int | None, node_text: Callable[[int], str]) -> int:
    """``declared`` when given, else the largest label + 1; an inferred count larger than the number of labelled
    nodes cannot be real classes (see :func:`num_classes_of`)."""
    used, top, node = summary
    top = top if used else 1
    if declared is None and top > max(1, used):
        raise InputError(
            f"{node_text(node)} has label {top - 1}, which would make {top} classes for "
            f"{used} labelled nodes: a label is out of range; give the number of classes "
            "(--num-classes) to check the labels against"
        )
    return declared if declared is not None else top


def out_of_range(ids: np.ndarray, labels: np.ndarray, classes: int) -> tuple[int, int] | None:
    """The smallest node of ``ids`` whose label is outside ``[0, classes)``, and its label (None: none is)."""
    bad = np.flatnonzero((labels < 0) | (labels >= classes))
    if not bad.size:
        return None
    first = bad[np.argmin(ids[bad])]
    return int(ids[first]), int(labels[first])


def refuse_out_of_range(
    found: tuple[int, int] | None, classes: int, declared: int | None, source: str, *, node_text: Callable[[int], str]
) -> None:
    if found is None:
        return
    what = f"the {classes} classes declared by {source}" if declared is not None else "the classes (labels are >= 0)"
    raise InputError(f"{node_text(found[0])} has label {found[1]}, outside {what}")


def split_node_text(ntype: str, to_original: Callable, where: Callable[[int], str]) -> Callable[[int], str]:
    """How an error names a split node: by type and original ID, and (``where``) the file of its label."""

    def text(node: int) -> str:
        orig = int(to_original(torch.tensor([node]))[0])
        return f"{ntype!r} node {orig} (original ID{where(node)}) of a train/val/test split"

    return text


def num_classes_of(
    labels: np.ndarray,
    masks: dict[str, np.ndarray],
    declared: int | None,
    ntype: str,
    *,
    to_original=lambda ids: ids,
    source: str = "--num-classes",
    where=lambda node: "",
) -> int:
    """The number of classes: ``declared`` (by ``source``: the flag, or the partition config recording the
    dataset's count) when given, else the largest label of a split node + 1. Every node in a split must carry
    a label in ``[0, classes)``; nodes outside the splits are not read. An inferred count larger than the
    number of split nodes cannot be real classes (some label is out of range, and the output layer would
    silently grow to fit it): that is an error asking for the count. Errors name the node by original ID and,
    through ``where(node)``, the file its label was read from. (Training spreads the same checks over the
    ranks, each reading its own partition's labels: :func:`label_summary`, :func:`out_of_range`.)"""
    used = np.zeros(labels.shape[0], dtype=bool)
    for mask in masks.values():
        used |= mask
    ids = np.flatnonzero(used)
    text = split_node_text(ntype, to_original, where)
    classes = classes_of(label_summary(ids, labels[ids]), declared, text)
    refuse_out_of_range(out_of_range(ids, labels[ids], classes), classes, declared, source, node_text=text)
    return classes


def _bad_rows(x) -> torch.Tensor | None:
    """Rows of ``x`` holding NaN or infinity (None: not a float feature, or empty)."""
    if isinstance(x, CSRRows):  # only the stored values can be non-finite
        if not np.issubdtype(x.data.dtype, np.floating):
            return None
        at = np.flatnonzero(~np.isfinite(x.data))
        return torch.from_numpy(np.unique(np.searchsorted(x.indptr, at, side="right") - 1))
    if not torch.is_floating_point(x) or x.numel() == 0:
        return None
    rows = x.reshape(x.shape[0], -1)
    step = max(1, (1 << 24) // max(rows.shape[1], 1))  # blocks of ~16 M values: the mask stays small
    bad = [torch.nonzero(~torch.isfinite(rows[b : b + step]).all(dim=1))[:, 0] + b for b in range(0, len(rows), step)]
    return torch.cat(bad) if bad else torch.zeros(0, dtype=torch.int64)

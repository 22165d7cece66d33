"""What a node (or edge) label asks the model to learn, read from the label's dtype and shape:

- ``classification``: one integer class per item (a 1-D integer array, or one column): softmax over the classes;
- ``multilabel``: a 2-D 0/1 matrix (integers or booleans) of several columns, one per label: a sigmoid per
  column;
- ``regression``: floats, one value (1-D) or a vector (2-D) per item: the outputs are the values.

``--label-kind`` overrides what the dtype and shape say (integer ratings as regression targets, or a float
0/1 matrix as labels). The model's output width is the class count (classification) or the label's width."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError

LABEL_KINDS = ("classification", "multilabel", "regression")


def kind_of(integral: bool, row_shape: tuple[int, ...], asked: str | None, what: str) -> str:
    """The label kind of a label ``what`` (named in errors) of integers (``integral``) or floats, with
    ``row_shape`` per item (``()``: one value): ``asked`` when given (and possible for that shape), else read
    from the dtype and shape (see the module docstring)."""
    if len(row_shape) > 1:
        raise InputError(f"{what}: labels must be one value or one row per item, got rows of shape {row_shape}")
    found = ("classification" if row_shape in ((), (1,)) else "multilabel") if integral else "regression"
    if asked is None:
        return found
    if asked == "classification" and row_shape not in ((), (1,)):
        raise InputError(f"{what}: label kind classification needs one class per item; its rows are {row_shape}")
    if asked == "multilabel" and not row_shape:
        raise InputError(f"{what}: label kind multilabel needs a 2-D 0/1 matrix; it holds one value per item")
    return asked


def width(row_shape: tuple[int, ...]) -> int:
    """Columns of a label with ``row_shape`` per item (1 for one value per item)."""
    return int(row_shape[0]) if row_shape else 1


@dataclass(frozen=True)
class LabelProblem:
    """The first item (by position in the array checked) whose label does not fit its kind, and why."""

    position: int
    why: str


def problem(kind: str, labels: np.ndarray) -> LabelProblem | None:
    """Whether ``labels`` fit ``kind`` beyond their shape: multi-label entries are 0 or 1, regression targets
    finite (classification's range is checked against the class count: :mod:`.checks`). None: they fit."""
    if not labels.size or kind == "classification":
        return None
    rows = labels.reshape(labels.shape[0], -1)
    if kind == "multilabel":
        bad = ~((rows == 0) | (rows == 1))
        why = "is not 0 or 1"
    else:
        bad = ~np.isfinite(rows)
        why = "is not finite"
    at = np.flatnonzero(bad.any(axis=1))
    if not at.size:
        return None
    col = int(np.argmax(bad[at[0]]))
    value = rows[at[0], col].item()
    where = f"column {col}: " if labels.ndim == 2 else ""
    return LabelProblem(int(at[0]), f"{where}{value!r} {why} (label kind {kind})")


def as_targets(kind: str, labels: np.ndarray) -> np.ndarray:
    """Labels as the loss reads them: int64 classes, float32 0/1 columns, float32 values."""
    return labels.astype(np.int64) if kind == "classification" else labels.astype(np.float32)

"""Labels and splits, in NumPy, from the labelled rows an engine hands over (the same arrays from either
engine, so the same result).

Labels: classification classes are the sorted distinct values (integers by value, strings by code point),
stored as their index (``-1``: no label); regression values as float32 (NaN: none); multi-label rows as 0/1
int8 over the sorted label vocabulary. Node splits are exact: of ``n`` labelled nodes, ``floor(f·n)`` go to
train and to val, the rest of the fractions' share to test (all of it when they sum to 1), by a permutation
seeded with ``seed``, or in the order of a time column (ties by node ID), or as a split column says. Edge
splits by fractions are drawn per edge from a hash of ``(seed, source, destination)``, so that either engine,
in whatever order it wrote the edges, puts each edge in the same split.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from .checks import sample_text
from .config import Label, Split
from .fit import sort_categories

SPLITS = ("train_mask", "val_mask", "test_mask")


def _missing(values: Any) -> np.ndarray:
    """Rows of an Arrow array without a value (null, or NaN for floats)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    miss = values.is_null().to_numpy(zero_copy_only=False)
    if pa.types.is_floating(values.type):
        miss |= pc.fill_null(pc.is_nan(values), False).to_numpy(zero_copy_only=False)
    return miss


def _split_values(values: Any, separator: str | None) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        return pc.split_pattern(values, separator or ",")
    return pc.cast(values, pa.list_(pa.string()))


def label_arrays(
    label: Label, nids: np.ndarray, values: Any, keys: Any, *, count: int, where: str
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """The label array of ``count`` items from labelled rows (``nids``, Arrow ``values``, user IDs ``keys``
    for messages), which rows hold a label, and the label's description for ``transforms.json``.

    Raises:
        InputError: rows without a label (unless ``allow_missing``), naming a sample of them.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    values = values.combine_chunks() if hasattr(values, "combine_chunks") else values
    miss = _missing(values)
    if miss.any() and not label.allow_missing:
        sample = sample_text(keys.filter(pa.array(miss)).slice(0, 6).to_pylist())
        raise InputError(
            f"{where}, column {label.column!r}: {int(miss.sum())} rows have no label (null or NaN; rows {sample}); "
            "set 'allow_missing: true' to leave them out of the splits"
        )
    has = ~miss
    fitted: dict[str, Any] = {"column": label.column, "kind": label.kind}
    if label.kind == "regression":
        out = np.full(count, np.nan, np.float32)
        out[nids[has]] = pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False)[has]
        return out, has, fitted
    if label.kind == "classification":
        text = pc.cast(values, pa.string())
        classes = sort_categories(pc.unique(text.filter(pa.array(has))).to_pylist(), pa.types.is_integer(values.type))
        index = pc.index_in(text, value_set=pa.array(classes, pa.string())).to_numpy(zero_copy_only=False)
        out = np.full(count, -1, np.int64)
        out[nids[has]] = index[has]
        return out, has, fitted | {"classes": classes}
    lists = _split_values(values, label.separator)
    flat = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
    element_type = lists.type.value_type
    classes = sort_categories(
        [c for c in pc.unique(flat).to_pylist() if c not in (None, "")], pa.types.is_integer(element_type)
    )
    index = pc.index_in(flat, value_set=pa.array(classes, pa.string())).to_numpy(zero_copy_only=False)
    keep = ~np.isnan(index.astype(np.float64)) if index.dtype.kind == "f" else np.ones(index.size, bool)
    rows = np.zeros((count, len(classes)), np.int8)
    rows[nids[parents[keep]], index[keep].astype(np.int64)] = 1
    return rows, has, fitted | {"classes": classes}


def node_splits(
    split: Split, nids: np.ndarray, order: np.ndarray | None, column: Any, *, count: int
) -> dict[str, np.ndarray]:
    """Boolean train/val/test masks of ``count`` nodes over the labelled ``nids`` (sorted), split as ``split``
    says: ``order`` holds the time values of a time split, ``column`` the split column's strings."""
    masks = {name: np.zeros(count, bool) for name in SPLITS}
    if split.column:
        text = column.to_numpy(zero_copy_only=False)
        for name, word in zip(SPLITS, ("train", "val", "test")):
            masks[name][nids[text == word]] = True
        return masks
    if order is not None:
        ranked = nids[np.lexsort((nids, order))]
    else:
        ranked = nids[np.random.default_rng(split.seed).permutation(nids.size)]
    n = nids.size
    fr = split.fractions or (0.8, 0.1, 0.1)
    train, val = int(np.floor(fr[0] * n)), int(np.floor(fr[1] * n))
    test = n - train - val if abs(sum(fr) - 1.0) < 1e-9 else int(np.floor(fr[2] * n))
    bounds = np.cumsum([0, train, val, test])
    for name, lo, hi in zip(SPLITS, bounds[:-1], bounds[1:]):
        masks[name][ranked[lo:hi]] = True
    return masks


def edge_uniform(seed: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """A uniform number in [0, 1) per edge, from ``(seed, src, dst)`` alone (SplitMix64's finaliser)."""
    with np.errstate(over="ignore"):
        x = src.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        x ^= dst.astype(np.uint64) + np.uint64(seed) * np.uint64(0xD1B54A32D192ED03) + np.uint64(0x632BE59BD9B4E019)
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def edge_masks(u: np.ndarray, has: np.ndarray, fractions: tuple[float, float, float]) -> dict[str, np.ndarray]:
    """Masks from per-edge uniform numbers ``u``; only edges that ``has`` a label are split."""
    cuts = np.cumsum([0.0, *fractions])
    return {name: has & (u >= lo) & (u < hi) for name, lo, hi in zip(SPLITS, cuts[:-1], cuts[1:])}

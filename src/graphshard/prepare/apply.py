"""Fitted transforms applied to new rows, in Python: what ``serve --id-map`` does with a new node given by its
raw column values (``{"columns": {"age": 31, "country": "fr"}}``), the same way ``prepare`` transformed the
table (see :mod:`graphshard.prepare.expressions` for the definitions).

``rank_gauss`` reads a value's rank off the 1,001 order statistics ``prepare`` recorded: exact for a value of
a column of at most 1,001 rows, interpolated between the neighbouring order statistics otherwise.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from ..errors import InputError
from .fit import order_statistic_ranks

_NORMAL = NormalDist()


def read_transforms(prepared: str | os.PathLike) -> dict[str, Any]:
    """``transforms.json`` of a prepared directory.

    Raises:
        InputError: it is missing or not the JSON ``prepare`` writes.
    """
    path = Path(prepared) / "transforms.json"
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the fitted transforms ({exc})") from None
    if not isinstance(raw, dict) or raw.get("version") != 1 or not isinstance(raw.get("nodes"), dict):
        raise InputError(f"{path}: not the transforms 'graphshard prepare' writes (version 1)")
    return raw


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(value: Any, column: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"column {column!r}: expected a number, got {value!r}")
    if math.isinf(value):
        raise InputError(f"column {column!r}: {value!r} is not finite")
    return float(value)


def _rank_u(f: dict[str, Any], x: float) -> float:
    q, n = f["quantiles"], int(f["count"])
    ranks = order_statistic_ranks(n, len(q))
    j = int(np.searchsorted(q, x, side="left"))
    if j < len(q) and q[j] == x:
        rank = float(ranks[j])
    elif j == 0:
        rank = 1.0
    elif j == len(q):
        rank = float(n) + 1.0
    else:  # between two order statistics: their ranks, interpolated by value
        lo, hi = q[j - 1], q[j]
        rank = ranks[j - 1] + (ranks[j] - ranks[j - 1]) * (x - lo) / (hi - lo)
    return min(max((rank - 0.5) / n, 0.5 / n), 1 - 0.5 / n)


def _numeric(f: dict[str, Any], value: Any) -> list[float]:
    x = f["fill"] if _missing(value) else _number(value, f["column"])
    t = f["transform"]
    if t == "min_max":
        span = f["max"] - f["min"]
        return [(x - f["min"]) / span if span > 0 else 0.0]
    if t == "standard":
        return [(x - f["mean"]) / f["std"] if f["std"] > 0 else 0.0]
    if t == "rank_gauss":
        return [_NORMAL.inv_cdf(_rank_u(f, x))]
    if t == "bucket":
        hot = [0.0] * f["width"]
        hot[int(np.searchsorted(f["buckets"], x, side="right"))] = 1.0
        return hot
    return [x]


def _elements(f: dict[str, Any], value: Any) -> list[str]:
    if _missing(value):
        return []
    if isinstance(value, str):
        return [v for v in value.split(f.get("separator") or ",") if v]
    if isinstance(value, list):
        return [str(v) if not isinstance(v, bool) else str(v).lower() for v in value if v is not None]
    raise InputError(f"column {f['column']!r}: expected a list or a string, got {value!r}")


def _columns(f: dict[str, Any], value: Any) -> list[float]:
    if f.get("vector"):
        if not isinstance(value, list) or len(value) != f["width"]:
            raise InputError(f"column {f['column']!r}: expected a list of {f['width']} numbers, got {value!r}")
        return [_number(v, f["column"]) for v in value]
    vocab = f.get("vocabulary")
    if vocab is None:
        return _numeric(f, value)
    if f["transform"] == "categorical":
        key = None if _missing(value) else (str(value).lower() if isinstance(value, bool) else str(value))
        return [1.0 if key == v else 0.0 for v in vocab]
    present = set(_elements(f, value))
    return [1.0 if v in present else 0.0 for v in vocab]


def feature_row(fitted: list[dict[str, Any]], values: dict[str, Any], name: str = "feat") -> np.ndarray:
    """The row of feature ``name`` for one new item whose raw column ``values`` are given, from the item type's
    fitted transforms (``transforms.json``: ``nodes[<type>]["features"]``). A column not given is missing.

    Raises:
        InputError: a value of the wrong kind (naming its column), or no transform writes ``name``.
    """
    pieces = [f for f in fitted if f["name"] == name and f.get("output") != "index"]
    if not pieces:
        raise InputError(f"no fitted transform writes the feature {name!r}")
    unknown = sorted(set(values) - {f["column"] for f in fitted})
    if unknown:
        raise InputError(f"column {unknown[0]!r}: not a column the features were fitted to")
    row = [v for f in pieces for v in _columns(f, values.get(f["column"]))]
    return np.asarray(row, dtype=np.float32)

"""Sparse (CSR) node features in format v1, an additive extension.

A feature ``<type>/<name>`` held as CSR is stored in its partition's ``node_feats.safetensors`` as three
1-D tensors ``<type>/<name>/indptr`` (int64, inner rows + 1, from 0), ``<type>/<name>/indices``
(int64 columns) and ``<type>/<name>/data`` (the values, the feature's dtype). The config lists such
features under ``"sparse_features": {"node_feats": [...]}``; its ``feature_schema`` records each as the
dense feature it stands for (dtype, row shape ``[width]``), so readers that ask for rows see the same
schema either way."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..sparse import PARTS, CSRRows, from_tensors

KEY = "sparse_features"


def sparse_entry(node_feats: Mapping[str, Mapping[str, object]]) -> dict[str, Any]:
    """The config entry naming the CSR node features of a graph's ``node_feats`` (empty when none)."""
    keys = sorted(f"{t}/{n}" for t, feats in node_feats.items() for n, a in feats.items() if isinstance(a, CSRRows))
    return {KEY: {"node_feats": keys}} if keys else {}


def stored_tensors(tensors: dict[str, Any]) -> dict[str, Any]:
    """``tensors`` with every :class:`CSRRows` replaced by the three tensors it is stored as."""
    out: dict[str, Any] = {}
    for k, v in tensors.items():
        out.update(v.tensors(k) if isinstance(v, CSRRows) else {k: v})
    return out


def sparse_widths(cfg: Any, kind: str) -> dict[str, int]:
    """The CSR features of ``kind`` (``node_feats``) a config lists, with their widths; an error naming
    the config when the entry is malformed or names a feature its schema lacks."""
    entry = cfg.extra.get(KEY, {})
    keys = entry.get(kind, []) if isinstance(entry, dict) else None
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise FormatError(f"{cfg.path}: key {KEY!r} must map 'node_feats' to a list of feature names")
    out = {}
    for k in keys:
        spec = cfg.feature_schema.get(kind, {}).get(k)
        if spec is None or len(spec[1]) != 1:
            raise FormatError(
                f"{cfg.path}: sparse feature {k!r} is not a feature of one row dimension in feature_schema"
            )
        out[k] = int(spec[1][0])
    return out


def assemble(tensors: dict[str, Any], widths: dict[str, int], path: Path) -> dict[str, Any]:
    """A partition file's tensors with each listed CSR feature gathered into one checked :class:`CSRRows`."""
    out = dict(tensors)
    sparse = {k: from_tensors(out, k, w, path) for k, w in widths.items()}
    return out | sparse


def logical_schema(
    physical: dict[str, tuple[str, tuple[int, ...]]], widths: dict[str, int]
) -> dict[str, tuple[str, tuple[int, ...]]]:
    """A file header's schema with each CSR feature's three tensors read as the dense feature (the data's
    dtype, rows of ``width``), as the config's ``feature_schema`` records it."""
    out = dict(physical)
    for k, w in widths.items():
        indptr, indices, data = [out.pop(f"{k}/{p}", None) for p in PARTS]
        if indptr is not None and indices is not None and data is not None:
            out[k] = (data[0], (w,))
    return out

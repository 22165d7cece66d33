"""Reduced-precision feature storage (``feat_dtype``): floating-point node and edge features written as
float16 or bfloat16, half the bytes of float32. The config records the choice (``"feat_dtype"``) and the
``feature_schema`` the stored dtype of each feature; the runtime serves rows as stored and models upcast
them to float32 at their input.

bfloat16 is no NumPy dtype: in NumPy its values are held as :data:`~.tensorfile.BFLOAT16` (a 2-byte record
of the raw bits, which the files store under safetensors' code ``"BF16"`` and torch reads as
``torch.bfloat16``). Conversion rounds to nearest, ties to even, as torch does. CSR (sparse) node features
keep their dtype: the runtime reads their values with NumPy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InputError
from ..sparse import CSRRows
from .tensorfile import BFLOAT16, Lazy

CONFIG_KEY = "feat_dtype"
FEAT_DTYPES = {"float16": np.dtype(np.float16), "bfloat16": BFLOAT16}
FLOAT16_MAX = float(np.finfo(np.float16).max)  # 65504: a finite value beyond it is stored as inf
_BLOCK_ROWS = 1 << 18  # rows scanned at a time for the largest magnitude


def check_feat_dtype(feat_dtype: str | None) -> str | None:
    """``feat_dtype`` if it is None (features as given) or one of :data:`FEAT_DTYPES`, else :class:`InputError`."""
    if feat_dtype is not None and feat_dtype not in FEAT_DTYPES:
        raise InputError(f"feat_dtype {feat_dtype!r}: choose one of {', '.join(FEAT_DTYPES)} (or none: as given)")
    return feat_dtype


def feat_dtype_entry(feat_dtype: str | None) -> dict[str, str]:
    """The config entry recording ``feat_dtype`` (empty when features are stored as given)."""
    return {CONFIG_KEY: feat_dtype} if feat_dtype is not None else {}


def narrows(dtype: Any, feat_dtype: str | None) -> bool:
    """Whether a dense feature of ``dtype`` is stored in ``feat_dtype`` (floating point wider than 2 bytes)."""
    dt = np.dtype(dtype)
    return feat_dtype is not None and dt.kind == "f" and dt.itemsize > 2


def stored_dtype(dtype: Any, feat_dtype: str | None) -> np.dtype:
    """The dtype a dense feature of ``dtype`` is written in under ``feat_dtype``."""
    return FEAT_DTYPES[feat_dtype] if feat_dtype is not None and narrows(dtype, feat_dtype) else np.dtype(dtype)


def narrow(values: np.ndarray, feat_dtype: str) -> np.ndarray:
    """``values`` (floating point) in ``feat_dtype``: float16, or bfloat16 as :data:`BFLOAT16` records."""
    if feat_dtype == "float16":
        return values.astype(np.float16)
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)).astype(
        np.uint16
    )
    rounded[np.isnan(values)] = 0x7FC0  # a quiet NaN, as torch makes it
    return rounded.view(BFLOAT16)


def largest_magnitude(values: Any) -> float:
    """The largest absolute finite value of a floating-point array (0.0 when it has none), a block of rows at a
    time (never a whole copy of a large feature)."""
    largest = 0.0
    for lo in range(0, len(values), _BLOCK_ROWS):
        block = np.abs(np.asarray(values[lo : lo + _BLOCK_ROWS]))
        finite = block[np.isfinite(block)]
        if finite.size:
            largest = max(largest, float(finite.max()))
    return largest


def check_in_range(feats: dict[str, Any], feat_dtype: str | None) -> None:
    """Refuse to narrow a feature whose finite values float16 cannot hold: stored as float16 they would become
    ``inf`` and training would fail later, blaming the data.

    Args:
        feats: Feature arrays by name (``"<type>/<name>"``); CSR features and integers are not narrowed.
        feat_dtype: The storage type asked for; only ``"float16"`` has a narrower range than float32.

    Raises:
        InputError: A feature holds a finite value beyond float16's largest (65504); names the feature, its
            largest magnitude and ``bfloat16`` (float32's range in 2 bytes) as the way out.
    """
    if feat_dtype != "float16":
        return
    for name, v in feats.items():
        if isinstance(v, (CSRRows, Lazy)) or not narrows(v.dtype, feat_dtype):
            continue
        largest = largest_magnitude(v)
        if largest > FLOAT16_MAX:
            raise InputError(
                f"feature {name!r} holds values up to {largest:.6g} in magnitude, beyond float16's largest "
                f"({FLOAT16_MAX:g}): stored as float16 they would become inf. Use feat_dtype bfloat16 "
                "(--feat-dtype bfloat16: float32's range in 2 bytes), scale the feature, or store it as given"
            )


def narrow_feats(feats: dict[str, Any], feat_dtype: str | None) -> dict[str, Any]:
    """One partition's feature arrays (``"<type>/<name>"`` → array) as written under ``feat_dtype``: dense
    floating-point features converted a block of rows at a time while the file is written (never whole in
    memory twice), the others (integers, CSR features) as they are. Its callers check the features'
    range first (:func:`check_in_range`)."""
    if feat_dtype is None:
        return feats
    fd: str = feat_dtype
    out: dict[str, Any] = {}
    for k, v in feats.items():
        if isinstance(v, CSRRows) or isinstance(v, Lazy) or not narrows(v.dtype, feat_dtype):
            out[k] = v
            continue
        out[k] = Lazy(FEAT_DTYPES[fd], tuple(v.shape), _rows_in(np.asarray(v), fd))
    return out


def _rows_in(arr: np.ndarray, feat_dtype: str) -> Callable[[int, int], np.ndarray]:
    """Rows ``[lo, hi)`` of ``arr`` in ``feat_dtype`` (a :class:`Lazy` tensor's ``make``)."""
    return lambda lo, hi: narrow(arr[lo:hi], feat_dtype)

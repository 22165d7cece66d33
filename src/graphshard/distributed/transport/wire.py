"""How dense feature rows travel between processes: as stored (the default), or compact — floating-point
rows as 16-bit floats (``float16``/``bfloat16``: half the bytes, rounded) and integer rows in the
narrowest integer type that holds the values sent (exact) — converted back to the stored type on arrival.
Byte counts of the remote-feature cache (``bytes_saved``) stay in stored widths."""

from __future__ import annotations

import torch

from ...errors import InputError

STORED = "stored"
WIRE_DTYPES = (STORED, "float16", "bfloat16")
_FLOATS = {"float16": torch.float16, "bfloat16": torch.bfloat16}
_NARROW_INTS = (torch.int8, torch.int16, torch.int32)
_FLOAT16_MAX = torch.finfo(torch.float16).max  # 65504: a finite value beyond it arrives as inf


def check_wire(wire: str) -> str:
    """``wire`` if it names a wire type (one of :data:`WIRE_DTYPES`), else :class:`InputError`."""
    if wire not in WIRE_DTYPES:
        raise InputError(f"wire dtype {wire!r}: choose one of {', '.join(WIRE_DTYPES)}")
    return wire


def pack(rows: torch.Tensor, wire: str = STORED, name: str = "") -> torch.Tensor:
    """``rows`` as they are sent: unchanged for :data:`STORED`; otherwise floating point narrowed to
    ``wire`` (when it is narrower) and integers to the narrowest type that holds every value (so
    :func:`unpack` gives back exactly what was stored).

    Raises:
        InputError: ``float16`` cannot carry a finite value of these rows (beyond 65504): names the feature
            (``name``), the largest magnitude and ``bfloat16`` as the way out, instead of sending ``inf``.
    """
    if wire == STORED:
        return rows
    if rows.is_floating_point():
        target = _FLOATS.get(wire)
        if target is None or rows.element_size() <= 2:
            return rows
        out = rows.to(target)
        if target == torch.float16 and bool(torch.isinf(out).any()):  # one pass over the 2-byte rows
            _refuse_overflow(rows, name)
        return out
    if rows.dtype in (torch.int16, torch.int32, torch.int64) and rows.numel():
        lo, hi = (int(v) for v in torch.aminmax(rows))
        for t in _NARROW_INTS:
            info = torch.iinfo(t)
            if info.bits // 8 < rows.element_size() and info.min <= lo and hi <= info.max:
                return rows.to(t)
    return rows


def _refuse_overflow(rows: torch.Tensor, name: str) -> None:
    """Raise when ``rows`` hold a finite value float16 cannot carry (an ``inf`` stored as such travels as is)."""
    finite = rows[torch.isfinite(rows)].abs()
    largest = float(finite.max()) if finite.numel() else 0.0
    if largest > _FLOAT16_MAX:
        raise InputError(
            f"feature {name or '(unnamed)'!r} holds values up to {largest:.6g} in magnitude, beyond float16's "
            f"largest ({_FLOAT16_MAX:g}): --wire-dtype float16 would send them as inf. Use --wire-dtype bfloat16 "
            "(float32's range in 2 bytes) or stored"
        )


def unpack(rows: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Rows that arrived, in the stored type ``dtype``."""
    return rows if rows.dtype == dtype else rows.to(dtype)

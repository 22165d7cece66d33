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


def check_wire(wire: str) -> str:
    """``wire`` if it names a wire type (one of :data:`WIRE_DTYPES`), else :class:`InputError`."""
    if wire not in WIRE_DTYPES:
        raise InputError(f"wire dtype {wire!r}: choose one of {', '.join(WIRE_DTYPES)}")
    return wire


def pack(rows: torch.Tensor, wire: str = STORED) -> torch.Tensor:
    """``rows`` as they are sent: unchanged for :data:`STORED`; otherwise floating point narrowed to
    ``wire`` (when it is narrower) and integers to the narrowest type that holds every value (so
    :func:`unpack` gives back exactly what was stored)."""
    if wire == STORED:
        return rows
    if rows.is_floating_point():
        target = _FLOATS.get(wire)
        return rows.to(target) if target is not None and rows.element_size() > 2 else rows
    if rows.dtype in (torch.int16, torch.int32, torch.int64) and rows.numel():
        lo, hi = (int(v) for v in torch.aminmax(rows))
        for t in _NARROW_INTS:
            info = torch.iinfo(t)
            if info.bits // 8 < rows.element_size() and info.min <= lo and hi <= info.max:
                return rows.to(t)
    return rows


def unpack(rows: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Rows that arrived, in the stored type ``dtype``."""
    return rows if rows.dtype == dtype else rows.to(dtype)

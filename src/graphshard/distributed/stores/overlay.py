"""The in-memory overlay of graphshard's PyG stores: writes kept in one Python object, over stored data
that is never modified.

A partition's features are memory-mapped from files shared by every process that serves them, so a
write never reaches them. Instead each store object keeps what was written to it: a :class:`Written`
per tensor, either a whole tensor put in memory (``base``) or rows patched over the stored tensor (or
over such a base), and the set of stored tensors removed from it. Reads look at the overlay first, then
at the stored data. Nothing here is shared between processes: each process, and each store object,
has its own overlay (a loader's worker processes get a copy of it as it was when they started).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from ...errors import InputError

__all__ = ["Rows", "Written", "as_written_tensor", "full_or_rows", "num_rows"]

Rows = slice | int | torch.Tensor


def num_rows(rows: Rows, count: int) -> tuple[int, ...]:
    """The leading shape ``rows`` selects out of ``count`` rows (``()`` for a single int row)."""
    if isinstance(rows, slice):
        return (len(range(*rows.indices(count))),)
    return () if isinstance(rows, int) else (int(rows.numel()),)


@dataclass
class Written:
    """What was written to one tensor of ``count`` rows: ``base`` (a tensor put whole, or None: the
    stored tensor) with the rows ``rows`` (sorted, unique) replaced by ``values``."""

    base: torch.Tensor | None
    count: int
    rows: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.int64))
    values: torch.Tensor | None = None

    def spec(self, stored: tuple[torch.dtype, tuple[int, ...]] | None) -> tuple[torch.dtype, tuple[int, ...]]:
        """``(dtype, row shape)`` of the tensor reads return (``stored``: the stored tensor's)."""
        if self.base is None:
            assert stored is not None
            return stored
        return self.base.dtype, tuple(self.base.shape[1:])

    def read(self, rows: Rows, stored: Callable[[Rows], torch.Tensor]) -> torch.Tensor:
        """Rows ``rows`` (checked against ``count``) of the written tensor; ``stored`` reads the stored one."""
        out = stored(rows) if self.base is None else _take(self.base, rows)
        if self.values is None:
            return out
        single = isinstance(rows, int)
        asked = _as_ids(rows, self.count)
        pos = torch.searchsorted(self.rows, asked).clamp_(max=max(self.rows.numel() - 1, 0))
        hit = self.rows[pos] == asked
        if not bool(hit.any()):
            return out
        out = out.unsqueeze(0).clone() if single else out.clone()  # never write into a stored (mapped) view
        out[hit] = self.values[pos[hit]].to(out.dtype)
        return out[0] if single else out

    def patched(self, rows: torch.Tensor, values: torch.Tensor) -> None:
        """Replace rows ``rows`` (unique, in range) by ``values``; later writes of a row win."""
        if self.values is None:
            order = torch.argsort(rows)
            self.rows, self.values = rows[order], values[order]
            return
        all_rows = torch.cat([self.rows, rows])
        all_values = torch.cat([self.values, values.to(self.values.dtype)])
        order = torch.argsort(all_rows, stable=True)  # an old row sorts before its new value
        sorted_rows = all_rows[order]
        last = torch.ones_like(sorted_rows, dtype=torch.bool)
        last[:-1] = sorted_rows[1:] != sorted_rows[:-1]
        self.rows, self.values = sorted_rows[last], all_values[order[last]]


def _take(tensor: torch.Tensor, rows: Rows) -> torch.Tensor:
    return torch.index_select(tensor, 0, rows) if isinstance(rows, torch.Tensor) else tensor[rows]


def _as_ids(rows: Rows, count: int) -> torch.Tensor:
    if isinstance(rows, torch.Tensor):
        return rows
    if isinstance(rows, int):
        return torch.tensor([rows], dtype=torch.int64)
    return torch.arange(count, dtype=torch.int64)[rows]


def as_written_tensor(tensor: object, what: str) -> torch.Tensor:
    """``tensor`` (a torch tensor or NumPy array with a row dimension) as a CPU tensor to keep."""
    if isinstance(tensor, np.ndarray):
        tensor = torch.from_numpy(tensor)
    if not isinstance(tensor, torch.Tensor):
        raise InputError(f"put {what}: expected a torch.Tensor or numpy.ndarray, got {type(tensor).__name__}")
    return tensor.detach().cpu()


def full_or_rows(tensor: torch.Tensor, rows: Rows, count: int, what: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Check a put of ``tensor`` at ``rows`` of a tensor of ``count`` rows. Returns ``(tensor, None)``
    when it gives every row (``tensor`` arranged in row order), else ``(tensor, row IDs)``."""
    shape = num_rows(rows, count)
    if isinstance(rows, int):
        tensor = tensor.unsqueeze(0)
    if tensor.dim() == 0 or tensor.shape[0] != (shape[0] if shape else 1):
        given = "a scalar" if tensor.dim() == 0 else f"{tensor.shape[0]} rows"
        every = " (index None: all of them)" if isinstance(rows, slice) and rows == slice(None) else ""
        raise InputError(
            f"put {what}: the tensor has {given} (shape {tuple(tensor.shape)}), but the index "
            f"selects {shape[0] if shape else 1} of the group's {count} rows{every}"
        )
    if isinstance(rows, slice) and rows.indices(count) == (0, count, 1):
        return tensor, None
    ids = _as_ids(rows, count)
    if torch.unique(ids).numel() != ids.numel():
        raise InputError(f"put {what}: the index names some rows more than once")
    if ids.numel() < count:
        return tensor, ids
    return torch.empty_like(tensor).index_copy_(0, ids, tensor), None

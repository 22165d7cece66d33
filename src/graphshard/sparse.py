"""Sparse (CSR) node features: bag-of-words and one-hot rows kept as their non-zeros from the dataset to
the partition files and the feature stores, and made dense only for the rows a batch asks for.

:class:`CSRRows` holds ``rows × width`` values as ``indptr`` (rows + 1), ``indices`` and ``data``. It
looks enough like an array for the partitioner (``shape``, ``dtype``, ``len``, row selection) and reads
dense rows as a tensor (``read``) or the non-zeros of some rows (``take``: what goes over the network).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import FormatError

PARTS = ("indptr", "indices", "data")  # the tensors a CSR feature is stored as: "<key>/<part>"


@dataclass(frozen=True)
class CSRRows:
    indptr: np.ndarray  # int64, rows + 1, from 0
    indices: np.ndarray  # int64 column of each non-zero
    data: np.ndarray  # its value
    width: int

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.indptr.shape[0]) - 1, int(self.width))

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return 2

    @property
    def nbytes(self) -> int:
        return int(self.indptr.nbytes + self.indices.nbytes + self.data.nbytes)

    def __len__(self) -> int:
        return self.shape[0]

    def dim(self) -> int:
        return 2

    @property
    def torch_dtype(self) -> Any:
        """The values' dtype as torch names it."""
        import torch

        return torch.from_numpy(self.data[:0]).dtype

    def nonzeros(self, rows: np.ndarray) -> tuple[Any, Any, Any]:
        """The non-zeros of ``rows`` as tensors (count per row, columns, values): what travels to a process
        that asked for them, which makes them dense (:func:`densify`)."""
        import torch

        part = self.take(rows)
        return torch.from_numpy(np.diff(part.indptr)), torch.from_numpy(part.indices), torch.from_numpy(part.data)

    def take(self, ids: np.ndarray) -> CSRRows:
        """The rows ``ids`` (in that order) as a new CSRRows."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        starts, counts = self.indptr[ids], self.indptr[ids + 1] - self.indptr[ids]
        indptr = np.zeros(ids.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        pos = np.repeat(starts - indptr[:-1], counts) + np.arange(int(indptr[-1]), dtype=np.int64)
        return CSRRows(indptr, np.asarray(self.indices[pos], dtype=np.int64), np.asarray(self.data[pos]), self.width)

    def dense(self) -> np.ndarray:
        """All rows as a dense array."""
        out = np.zeros(self.shape, dtype=self.data.dtype)
        out[np.repeat(np.arange(self.shape[0]), np.diff(self.indptr)), self.indices] = self.data
        return out

    def __getitem__(self, ids) -> np.ndarray:
        """Dense rows ``ids`` (an index array, slice or int), like a NumPy array's."""
        if isinstance(ids, slice):
            ids = np.arange(self.shape[0])[ids]
        elif isinstance(ids, (int, np.integer)):
            return self.take(np.array([ids])).dense()[0]
        return self.take(np.asarray(ids)).dense()

    def read(self, rows: Any) -> Any:
        """Dense rows ``rows`` (a tensor of row positions) as a tensor (what a batch gets)."""
        import torch

        return torch.from_numpy(self.take(rows.numpy()).dense())

    def tensors(self, key: str) -> dict[str, np.ndarray]:
        """The tensors the feature ``key`` is stored as in a partition file."""
        return {f"{key}/{p}": getattr(self, p) for p in PARTS}


def from_tensors(tensors: dict, key: str, width: int, path) -> CSRRows:
    """The CSR feature ``key`` from a partition file's tensors (removed from ``tensors``), checked:
    ``indptr`` from 0, never decreasing, ending at the number of non-zeros, columns within ``width``."""
    try:
        parts = [tensors.pop(f"{key}/{p}") for p in PARTS]
    except KeyError as exc:
        raise FormatError(f"{path}: sparse feature {key!r} lacks tensor {exc.args[0]!r}") from None
    indptr, indices, data = (p.numpy() if hasattr(p, "numpy") else np.asarray(p) for p in parts)
    ok = (
        indptr.ndim == 1
        and indptr.shape[0] >= 1
        and indices.ndim == 1
        and data.ndim == 1
        and indices.shape == data.shape
        and int(indptr[0]) == 0
        and int(indptr[-1]) == indices.shape[0]
        and not (np.diff(indptr) < 0).any()
        and np.issubdtype(indices.dtype, np.integer)
    )
    if ok and indices.size:
        ok = 0 <= int(indices.min()) and int(indices.max()) < width
    if not ok:
        raise FormatError(f"{path}: sparse feature {key!r} is not a valid CSR matrix of width {width}")
    return CSRRows(indptr.astype(np.int64, copy=False), indices.astype(np.int64, copy=False), data, int(width))


def densify(counts: Any, indices: Any, data: Any, width: int) -> Any:
    """Dense rows (a tensor) from the non-zeros of each row (``counts`` per row, then their columns and
    values, tensors)."""
    import torch

    out = torch.zeros((counts.shape[0], width), dtype=data.dtype)
    out[torch.repeat_interleave(torch.arange(counts.shape[0]), counts), indices] = data
    return out


def sparse_tensor(rows: CSRRows) -> Any:
    """``rows`` as a sparse COO tensor (float32), for a model that projects it by ``torch.sparse.mm``."""
    import torch

    counts = np.diff(rows.indptr)
    index = torch.from_numpy(np.stack([np.repeat(np.arange(rows.shape[0], dtype=np.int64), counts), rows.indices]))
    values = torch.from_numpy(np.asarray(rows.data, dtype=np.float32))
    return torch.sparse_coo_tensor(index, values, rows.shape, check_invariants=False).coalesce()


def joined(pieces: list[tuple[np.ndarray, tuple[Any, Any, Any]]], n: int, width: int) -> CSRRows:
    """Rows ``0 .. n - 1`` as CSR from pieces ``(positions, (counts, columns, values))`` that together cover
    every position once (the answers of the partitions that own them)."""
    counts = np.zeros(n, dtype=np.int64)
    for pos, (c, _, _) in pieces:
        counts[pos] = c.numpy()
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    values = [v for _, (_, _, v) in pieces]
    indices = np.empty(int(indptr[-1]), dtype=np.int64)
    data = np.empty(int(indptr[-1]), dtype=values[0].numpy().dtype if values else np.float32)
    for pos, (c, cols, vals) in pieces:  # each piece's rows, in its order, go to their rows' places
        c = c.numpy()
        if c.size == 0:
            continue
        at = np.repeat(indptr[pos] - np.concatenate([[0], np.cumsum(c)[:-1]]), c) + np.arange(int(c.sum()))
        indices[at], data[at] = cols.numpy(), vals.numpy()
    return CSRRows(indptr, indices, data, width)

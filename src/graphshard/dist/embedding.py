"""Learnable node embeddings stored in a :class:`DistTensor`, trained with a sparse optimiser: a step
sends each touched row's summed gradient to the row's owner, which applies the update in place."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ..book import RangePartitionBook
from ..errors import InputError
from ..ids import as_id_array
from .rpc import RpcGroup, by_owner
from .tensor import DistTensor, shard


class DistEmbedding:
    """``num_embeddings × dim`` embeddings for the nodes of ``ntype`` (initialised uniformly in
    ``±1/sqrt(dim)`` from ``seed``). Calling it with IDs returns rows that record their gradient for
    :class:`SparseAdagrad`."""

    def __init__(self, group: RpcGroup, book: RangePartitionBook, num_embeddings: int, dim: int, name: str,
                 ntype: str | None = None, seed: int = 0):
        bound = 1.0 / math.sqrt(dim)
        gen = torch.Generator().manual_seed(seed + group.part_id(book.num_partitions()))

        def init(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
            return torch.empty(shape, dtype=dtype).uniform_(-bound, bound, generator=gen)

        self.weight = DistTensor(group, book, (num_embeddings, dim), torch.float32, name, ntype=ntype, init=init)
        self.name, self.dim = name, dim
        self._trace: list[tuple[np.ndarray, torch.Tensor]] = []

    def __call__(self, ids: Any) -> torch.Tensor:
        ids_np = as_id_array(ids, f"IDs of embedding {self.name!r}")
        rows = self.weight[ids_np]
        if torch.is_grad_enabled():
            rows.requires_grad_(True)
            self._trace.append((ids_np, rows))
        return rows

    def take_gradients(self) -> tuple[np.ndarray, torch.Tensor]:
        """Unique IDs touched since the last step and their summed gradients; clears the record."""
        got = [(ids, rows.grad) for ids, rows in self._trace if rows.grad is not None]
        self._trace.clear()
        if not got:
            return np.zeros(0, dtype=np.int64), torch.zeros((0, self.dim))
        ids = np.concatenate([i for i, _ in got])
        uniq, inverse = np.unique(ids, return_inverse=True)
        grads = torch.zeros((uniq.shape[0], self.dim)).index_add_(0, torch.from_numpy(inverse),
                                                                  torch.cat([g for _, g in got]))
        return uniq, grads


def _adagrad(name: str, ids: torch.Tensor, grads: torch.Tensor, lr: float, eps: float) -> None:
    s = shard(name)
    rows = s.index(ids)
    with s.lock:
        state = s.state.setdefault("sum_sq", torch.zeros_like(s.rows))
        state[rows] += grads * grads
        s.rows[rows] -= lr * grads / (state[rows].sqrt() + eps)


class SparseAdagrad:
    """Adagrad on the rows of :class:`DistEmbedding` s that received gradients (state lives with each
    row's owner). Call :meth:`step` after ``backward``; there is nothing to zero."""

    def __init__(self, embeddings: list[DistEmbedding], lr: float, eps: float = 1e-10):
        if lr <= 0:
            raise InputError(f"learning rate must be positive, got {lr}")
        self.embeddings, self.lr, self.eps = list(embeddings), lr, eps

    def step(self) -> None:
        for emb in self.embeddings:
            ids, grads = emb.take_gradients()
            w = emb.weight
            by_owner(w.group, w._parts(ids), w.book.num_partitions(), None, _adagrad,
                     lambda pos: (w.name, torch.from_numpy(ids[pos]), grads[torch.from_numpy(pos)], self.lr, self.eps),
                     f"embedding {w.name!r} update")

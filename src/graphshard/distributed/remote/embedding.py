"""Learnable node embeddings stored in a :class:`DistTensor`, trained with a sparse optimiser: a step
sends each touched row's gradient to the row's owner; once every rank has sent, each owner sums the
gradients of a row over ranks (in rank order) and applies one update — deterministic, whatever the
arrival order, and the same update one process would make with the whole batch."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np
import torch

from ...book import RangePartitionBook
from ...errors import InputError
from ...ids import as_id_array
from ..groups.rpc import RpcGroup, by_owner
from ..transport.channel import handler
from .tensor import DistTensor, local_shard, shard


class DistEmbedding:
    """Learnable ``num_embeddings × dim`` embeddings for the nodes of ``ntype``, sharded like them.

    Calling it with IDs returns rows that record their gradient for `SparseAdagrad`. The rows live in a
    `DistTensor`; construction is collective over ``group``.

    Args:
        group: the RPC group whose members hold the partitions (a session's ``group``).
        book: the graph's partition book.
        num_embeddings: the number of rows: the number of nodes of ``ntype``.
        dim: the size of each embedding; rows are initialised uniformly in ``±1/sqrt(dim)``.
        name: the name of the underlying `DistTensor`, unique in the process.
        ntype: the node type the rows belong to; None: every node (homogeneous IDs).
        seed: the random seed of the initial rows.

    Raises:
        InputError: ``num_embeddings`` is not the number of nodes of ``ntype``, or a tensor of that name
            exists already.
    """

    def __init__(
        self,
        group: RpcGroup,
        book: RangePartitionBook,
        num_embeddings: int,
        dim: int,
        *,
        name: str,
        ntype: str | None = None,
        seed: int = 0,
    ):
        bound = 1.0 / math.sqrt(dim)
        gen = torch.Generator().manual_seed(seed + group.part_id(book.num_partitions()))

        def init(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
            return torch.empty(shape, dtype=dtype).uniform_(-bound, bound, generator=gen)

        self.weight = DistTensor(group, book, (num_embeddings, dim), torch.float32, name=name, ntype=ntype, init=init)
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
        grads = torch.zeros((uniq.shape[0], self.dim)).index_add_(
            0, torch.from_numpy(inverse), torch.cat([g for _, g in got])
        )
        return uniq, grads


@handler
def _stage(name: str, rank: int, ids: torch.Tensor, grads: torch.Tensor) -> None:
    s = shard(name)
    with s.lock:
        s.pending[rank] = (ids, grads)


def _apply_adagrad(name: str, lr: float, eps: float) -> None:
    s = shard(name)
    with s.lock:
        staged = [s.pending[r] for r in sorted(s.pending)]
        s.pending.clear()
    if not staged:
        return
    ids = torch.cat([i for i, _ in staged])
    uniq, inverse = torch.unique(ids, return_inverse=True)
    grads = torch.zeros((uniq.shape[0], *s.rows.shape[1:])).index_add_(0, inverse, torch.cat([g for _, g in staged]))
    rows = s.index(uniq)
    state = s.state.setdefault("sum_sq", torch.zeros_like(s.rows))
    state[rows] += grads * grads
    s.rows[rows] -= lr * grads / (state[rows].sqrt() + eps)


def _stage_args(
    name: str, rank: int, ids: np.ndarray, grads: torch.Tensor, pos: np.ndarray
) -> tuple[str, int, torch.Tensor, torch.Tensor]:
    """The arguments of :func:`_stage` for the gradients at ``pos``."""
    return name, rank, torch.from_numpy(ids[pos]), grads[torch.from_numpy(pos)]


class SparseAdagrad:
    """Adagrad on the rows of `DistEmbedding` objects that received gradients.

    The optimiser state lives with each row's owner. Call `step` after ``backward`` on every rank of the
    group (it is collective); there is nothing to zero.

    Args:
        embeddings: the embeddings to optimise.
        lr: the learning rate, positive.
        eps: added to the root of the summed squared gradients before dividing.

    Raises:
        InputError: ``lr`` is not positive.
    """

    def __init__(self, embeddings: list[DistEmbedding], lr: float, eps: float = 1e-10):
        if lr <= 0:
            raise InputError(f"learning rate must be positive, got {lr}")
        self.embeddings, self.lr, self.eps = list(embeddings), lr, eps

    def step(self) -> None:
        if not self.embeddings:
            return
        group = self.embeddings[0].weight.group
        for emb in self.embeddings:
            ids, grads = emb.take_gradients()
            w = emb.weight
            by_owner(
                w.group,
                w.owners(ids),
                w.book.num_partitions(),
                None,
                remote=_stage,
                args=partial(_stage_args, w.name, group.rank, ids, grads),
                what=f"embedding {w.name!r} gradients",
            )
        group.barrier("sparse gradients sent")
        for emb in self.embeddings:
            if local_shard(emb.weight.name) is not None:
                _apply_adagrad(emb.weight.name, self.lr, self.eps)
        group.barrier("sparse updates applied")

"""Distributed feature lookup: any rank reads any rows; local rows are gathered in-process, remote rows
come in one batched RPC per owner, all requests in flight at once, results in request order."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..book import RangePartitionBook
from ..ids import as_id_array
from .collectives import barrier
from .context import DistContext, DistError
from .local_store import LocalFeatureStore
from .rpc import register, registered, worker_name

_STORE = "feature-store"


def _serve_rows(group: Any, name: str, ids: torch.Tensor) -> torch.Tensor:
    """RPC handler: rows of ``group``/``name`` for global per-type ``ids`` owned by this process."""
    tensor = registered(_STORE).get_tensor(group, name, index=ids)
    if tensor is None:
        raise KeyError(f"no feature {name!r} for {group!r}")
    return tensor


class DistFeatureStore:
    """Feature rows of the whole graph, served by the ranks holding each partition.

    Partition ``p`` is held by ranks ``p * T ... p * T + T - 1`` (``T`` ranks per partition); requests go
    to the first of them. Node groups are node types; edge groups are canonical edge types.
    Construction is collective: every rank builds its store, and none sends a request before all have
    registered theirs.
    """

    def __init__(self, ctx: DistContext, local: LocalFeatureStore, book: RangePartitionBook):
        self.ctx, self.local, self.book = ctx, local, book
        if ctx.world_size % book.num_partitions():
            raise DistError(f"world size {ctx.world_size} is not a multiple of {book.num_partitions()} partitions")
        self.trainers = ctx.world_size // book.num_partitions()
        self.part_id = ctx.rank // self.trainers
        register(_STORE, local)
        self.stats = {"rows": 0, "remote_rows": 0, "bytes_received": 0}
        barrier(ctx, "feature stores registered")

    def _owner_parts(self, group: Any, ids: np.ndarray) -> np.ndarray:
        if isinstance(group, tuple):
            return self.book.eid2partid(ids, group).numpy()
        return self.book.nid2partid(ids, group).numpy()

    def lookup(self, group: Any, name: str, ids: Any) -> torch.Tensor:
        """Rows of feature ``name`` of ``group`` for global per-type ``ids``, in the order asked."""
        import torch.distributed.rpc as rpc

        ids_np = as_id_array(ids, f"IDs of {group!r}")
        parts = self._owner_parts(group, ids_np)
        order = np.argsort(parts, kind="stable")
        bounds = np.searchsorted(parts[order], np.arange(self.book.num_partitions() + 1))
        pending, local_rows = [], None
        for p in range(self.book.num_partitions()):
            pos = order[bounds[p]:bounds[p + 1]]
            if pos.size == 0:
                continue
            chunk = torch.from_numpy(ids_np[pos])
            if p == self.part_id:
                local_rows = (pos, self.local.get_tensor(group, name, index=chunk))
            else:
                owner = p * self.trainers
                fut = rpc.rpc_async(worker_name(owner), _serve_rows, args=(group, name, chunk), timeout=self.ctx.timeout)
                pending.append((pos, owner, fut))
        pieces = ([local_rows] if local_rows else []) + [(pos, self._wait(owner, fut)) for pos, owner, fut in pending]
        self.stats["rows"] += int(ids_np.shape[0])
        for pos, rows in pieces[1 if local_rows else 0:]:
            self.stats["remote_rows"] += int(pos.size)
            self.stats["bytes_received"] += rows.numel() * rows.element_size()
        if not pieces:
            return self.local.get_tensor(group, name, index=torch.zeros(0, dtype=torch.int64))
        first = pieces[0][1]
        out = torch.empty((ids_np.shape[0], *first.shape[1:]), dtype=first.dtype)
        for pos, rows in pieces:
            out[torch.from_numpy(pos)] = rows
        return out

    def _wait(self, owner: int, fut: Any) -> torch.Tensor:
        try:
            return fut.wait()
        except Exception as exc:  # remote exceptions and timeouts arrive as RuntimeError
            raise DistError(f"rank {self.ctx.rank}: feature request to rank {owner} failed: {exc}") from exc

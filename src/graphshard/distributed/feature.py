"""Distributed feature lookup: any process reads any rows; local rows are gathered in-process, remote rows
come in one batched RPC per owning partition, all requests in flight at once, results in request order."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch_geometric.data.feature_store import TensorAttr

from ..book import RangePartitionBook
from ..ids import as_id_array
from .local_store import LocalFeatureStore
from .rpc import RpcGroup, by_owner, register, registered
from .store_base import Group, ReadOnlyFeatureStore, Rows

_STORE = "feature-store"


def _serve_rows(key: str, group: Any, name: str, ids: torch.Tensor) -> torch.Tensor:
    """RPC handler: rows of ``group``/``name`` for global per-type ``ids`` owned by this process."""
    return registered(f"{_STORE}/{key}").get_tensor_from_global_id(group, name, ids)


class DistFeatureStore(ReadOnlyFeatureStore):
    """Feature rows of the whole graph, served by the processes holding each partition; a read-only PyG
    ``FeatureStore`` whose ``index`` is the global per-type ID (``None``/slices: every row of the graph).

    Node groups are node types; edge groups are canonical edge types (``None``/``(None, None)`` in a
    single-type graph, as in :class:`LocalFeatureStore`, whose names and rules it shares). Construction
    is collective over ``group``: no member sends a request before every member has registered its
    local store. ``key`` tells stores of different graphs in one process apart (the same on every member).
    """

    def __init__(self, group: RpcGroup, local: LocalFeatureStore, book: RangePartitionBook, key: str = ""):
        counts = {t: book.num_nodes(t) for t in book.ntypes} | {et: book.num_edges(et) for et in book.canonical_etypes}
        super().__init__(local.types, local.schema, counts, local.pyg_names)
        self.group, self.local, self.book, self.key = group, local, book, key
        self.part_id = group.part_id(book.num_partitions())
        register(f"{_STORE}/{key}", local)
        self.stats = {"rows": 0, "remote_rows": 0, "bytes_received": 0}
        group.barrier("feature stores registered")

    def _owner_parts(self, group: Group, ids: np.ndarray) -> np.ndarray:
        if isinstance(group, tuple):
            return self.book.eid2partid(ids, group).numpy()
        return self.book.nid2partid(ids, group).numpy()

    def has(self, group: Any, name: str) -> bool:
        return self.get_tensor_size(group, name) is not None

    def _read(self, group: Group, name: str, rows: Rows) -> torch.Tensor:
        if isinstance(rows, torch.Tensor):
            return self.lookup(group, name, rows)
        ids = torch.arange(self.counts[group])[rows]
        return self.lookup(group, name, ids.view(-1))[0] if isinstance(rows, int) else self.lookup(group, name, ids)

    def lookup(self, group: Any, name: str, ids: Any) -> torch.Tensor:
        """Rows of feature ``name`` of ``group`` for global per-type ``ids``, in the order asked."""
        group, name = self._key(TensorAttr(group, name))
        ids_np = as_id_array(ids, f"IDs of {group!r}")
        dtype, row_shape = self.schema[(group, name)]
        rows = lambda pos: self.local.get_tensor_from_global_id(group, name, ids_np[pos])  # noqa: E731
        parts = self._owner_parts(group, ids_np)
        pieces = by_owner(self.group, parts, self.book.num_partitions(), rows,
                          _serve_rows, lambda pos: (self.key, group, name, torch.from_numpy(ids_np[pos])),
                          f"feature {group!r}/{name!r}")
        self.stats["rows"] += int(ids_np.shape[0])
        if len(pieces) == 1 and parts.size and parts[0] == self.part_id:  # all local, already in order
            return pieces[0][1]
        out = torch.empty((ids_np.shape[0], *row_shape), dtype=dtype)
        for pos, got in pieces:
            out.index_copy_(0, torch.from_numpy(pos), got)
            if pos.size and parts[pos[0]] != self.part_id:
                self.stats["remote_rows"] += int(pos.size)
                self.stats["bytes_received"] += got.numel() * got.element_size()
        return out

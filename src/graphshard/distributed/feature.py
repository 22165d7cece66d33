"""Distributed feature lookup: any process reads any rows; local rows are gathered in-process, remote rows
come in one batched RPC per owning partition, all requests in flight at once, results in request order."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch_geometric.data.feature_store import TensorAttr

from ..book import RangePartitionBook
from ..ids import as_id_array
from ..sparse import CSRRows, densify, joined
from .cache import FeatureCache
from .local_store import LocalFeatureStore
from .rpc import RpcGroup, by_owner, register, registered
from .store_base import Group, ReadOnlyFeatureStore, Rows
from .wire import STORED, check_wire, pack, unpack

_STORE = "feature-store"


def _serve_rows(key: str, group: Any, name: str, ids: torch.Tensor, wire: str = STORED) -> torch.Tensor:
    """RPC handler: rows of ``group``/``name`` for global per-type ``ids`` owned by this process, packed
    for the wire (see :mod:`.wire`)."""
    return pack(registered(f"{_STORE}/{key}").get_tensor_from_global_id(group, name, ids), wire)


def _serve_nonzeros(key: str, group: Any, name: str, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """RPC handler: the non-zeros of a CSR feature's rows (made dense by the caller: only they travel)."""
    return registered(f"{_STORE}/{key}").nonzeros_from_global_id(group, name, ids)


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
        self.cache: FeatureCache | None = None
        group.barrier("feature stores registered")

    def attach_cache(self, cache: FeatureCache | None) -> None:
        """Serve the rows ``cache`` holds from it (read-only node data; see :mod:`.cache`)."""
        self.cache = cache

    def row_nbytes(self, group: Any, name: str) -> int:
        """Bytes of one row of ``group``/``name``."""
        dtype, shape = self.schema[self._key(TensorAttr(group, name))]
        return int(np.prod(shape, dtype=np.int64)) * torch.empty((), dtype=dtype).element_size()

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

    def is_sparse(self, group: Any, name: str) -> bool:
        """Whether node feature ``group``/``name`` is held as CSR (the same in every partition)."""
        return self.local.is_sparse(*self._key(TensorAttr(group, name)))

    def lookup_nonzeros(self, group: Any, name: str, ids: Any) -> CSRRows:
        """The rows of a CSR node feature for global per-type ``ids``, in the order asked, as CSR: only
        their non-zeros are read and sent (the remote-feature cache, which holds dense rows, is not used)."""
        group, name = self._key(TensorAttr(group, name))
        ids_np = as_id_array(ids, f"IDs of {group!r}")
        width = int(self.schema[(group, name)][1][0])
        parts = self._owner_parts(group, ids_np)
        self.stats["rows"] += int(ids_np.shape[0])
        pieces = by_owner(self.group, parts, self.book.num_partitions(),
                          lambda pos: self.local.nonzeros_from_global_id(group, name, ids_np[pos]), _serve_nonzeros,
                          lambda pos: (self.key, group, name, torch.from_numpy(ids_np[pos])), f"feature {group!r}/{name!r}")
        for pos, got in pieces:
            self._count_received(pos, parts, got)
        return joined(pieces, ids_np.shape[0], width)

    def _count_received(self, pos: np.ndarray, parts: np.ndarray, tensors: tuple[torch.Tensor, ...]) -> None:
        """Count the rows at ``pos`` and the bytes of ``tensors`` (their answer) when another partition sent them."""
        if pos.size and parts[pos[0]] != self.part_id:
            self.stats["remote_rows"] += int(pos.size)
            self.stats["bytes_received"] += sum(t.numel() * t.element_size() for t in tensors)

    def lookup(self, group: Any, name: str, ids: Any, wire: str = STORED) -> torch.Tensor:
        """Rows of feature ``name`` of ``group`` for global per-type ``ids``, in the order asked. ``wire``:
        how dense rows from other processes travel (``float16``/``bfloat16``: floats rounded to half
        precision on the way, integers narrowed exactly; see :mod:`.wire`); rows of this process and CSR
        features are read as stored."""
        group, name = self._key(TensorAttr(group, name))
        check_wire(wire)
        ids_np = as_id_array(ids, f"IDs of {group!r}")
        dtype, row_shape = self.schema[(group, name)]
        parts = self._owner_parts(group, ids_np)
        self.stats["rows"] += int(ids_np.shape[0])
        served, todo = [], None  # todo: positions still to fetch (None: all of them)
        if self.cache is not None and not isinstance(group, tuple):
            hit_pos, hit_rows, todo = self.cache.split(group, name, ids_np, parts != self.part_id)
            served = [(hit_pos, hit_rows)] if hit_pos.size else []
        asked = ids_np if todo is None else ids_np[todo]
        parts_asked = parts if todo is None else parts[todo]
        sparse = self.local.is_sparse(group, name)
        extra = () if sparse else (wire,)  # CSR rows travel as their non-zeros
        pieces = by_owner(self.group, parts_asked, self.book.num_partitions(),
                          lambda pos: self.local.get_tensor_from_global_id(group, name, asked[pos]),
                          _serve_nonzeros if sparse else _serve_rows,
                          lambda pos: (self.key, group, name, torch.from_numpy(asked[pos]), *extra),
                          f"feature {group!r}/{name!r}")
        if todo is None and len(pieces) == 1 and parts.size and parts[0] == self.part_id:  # all local, in order
            return pieces[0][1]
        out = torch.empty((ids_np.shape[0], *row_shape), dtype=dtype)
        for pos, got in pieces:
            received = got if isinstance(got, tuple) else (got,)
            if isinstance(got, tuple):  # a CSR feature's non-zeros
                got = densify(*got, int(row_shape[0]))
            out.index_copy_(0, torch.from_numpy(pos if todo is None else todo[pos]), unpack(got, dtype))
            self._count_received(pos, parts_asked, received)
        for pos, got in served:
            out.index_copy_(0, torch.from_numpy(pos), got)
        return out

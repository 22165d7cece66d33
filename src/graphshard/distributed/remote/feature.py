"""Distributed feature lookup: any process reads any rows; local rows are gathered in-process, remote rows
come in one batched RPC per owning partition (for any number of features and types read together), all
requests in flight at once, results in request order. Writes go to the store object's in-memory overlay:
remote ranks are always served stored data (see :class:`DistFeatureStore`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from functools import partial
from typing import Any

import numpy as np
import torch
from torch_geometric.data.feature_store import TensorAttr

from ...book import RangePartitionBook
from ...errors import InputError
from ...ids import as_id_array
from ...sparse import CSRRows, densify, joined
from ..groups.rpc import RpcGroup, by_owner, register, registered
from ..host.counts import Counts
from ..stores.base import Group, Rows, StoredFeatureStore, as_rows
from ..stores.local import LocalFeatureStore
from ..stores.rows import put_rows
from ..transport import channel
from ..transport.wire import STORED, check_wire, pack, unpack
from .cache import FeatureCache

_STORE = "feature-store"
Allocate = Callable[[tuple[int, ...], torch.dtype], torch.Tensor]  # (shape, dtype) -> uninitialised rows


@channel.handler
def _serve_nonzeros(key: str, group: Any, name: str, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """RPC handler: the non-zeros of a CSR feature's rows (made dense by the caller: only they travel)."""
    return registered(f"{_STORE}/{key}").nonzeros_from_global_id(group, name, ids)


@channel.handler
def _serve_many(key: str, items: list[tuple[Any, str, torch.Tensor, bool]], wire: str = STORED) -> list[Any]:
    """RPC handler: for each ``(group, name, ids, sparse)``, the rows (packed for the wire) or a CSR
    feature's non-zeros."""
    store = registered(f"{_STORE}/{key}")
    return [
        store.nonzeros_from_global_id(g, n, ids)
        if sparse
        else pack(store.stored_from_global_id(g, n, ids), wire, name=f"{g}/{n}" if g else n)
        for g, n, ids, sparse in items
    ]


class DistFeatureStore(StoredFeatureStore):
    """Feature rows of the whole graph, served by the processes holding each partition.

    A PyG ``FeatureStore`` whose ``index`` is the global per-type ID (``None``/slices: every row of the
    graph). Node groups are node types; edge groups are canonical edge types (``None``/``(None, None)`` in a
    single-type graph, as in `LocalFeatureStore`, whose names and rules it shares). Construction is
    collective over ``group``: no member sends a request before every member has registered its local store.

    Writes go to this object's in-memory overlay (`StoredFeatureStore`), in whole-graph rows: a put of every
    row (``index=None``, one row per node or edge of the type in the whole graph) is held in this process and
    every read through this object (``get_tensor``, `lookup`, `lookup_many`, hence graphshard's loaders over
    it) serves all its rows locally, with no request; updated rows of a stored tensor are served from the
    overlay, the others as stored. Other ranks never see this overlay: their requests are answered from the
    stored data (their own reads see their own overlay only), and the ``LocalFeatureStore`` given here is
    served as stored too, whatever its own overlay holds. So when every rank needs, say, a placeholder ``x``
    for a featureless type or a ``time`` attribute, every rank puts it (each holding all rows); nothing is
    sent, and the partition files are never written.

    Args:
        group: the RPC group whose members hold the partitions (a session's ``group``).
        local: the feature store of this process's partition, served to the other members.
        book: the graph's partition book.
        key: tells stores of different graphs in one process apart (the same on every member).
        near: stores of other partitions this process reads itself (co-located, see
            `graphshard.distributed.remote.colocated`), by runtime partition: their stored rows are read
            in-process, as the owner would serve them.
    """

    def __init__(
        self,
        group: RpcGroup,
        local: LocalFeatureStore,
        book: RangePartitionBook,
        key: str = "",
        *,
        near: dict[int, LocalFeatureStore] | None = None,
    ):
        counts = {t: book.num_nodes(t) for t in book.ntypes} | {et: book.num_edges(et) for et in book.canonical_etypes}
        super().__init__(local.types, local.schema, counts, local.pyg_names)
        self.group, self.local, self.book, self.key = group, local, book, key
        self.part_id = group.part_id(book.num_partitions())
        self.near = dict(near or {})
        register(f"{_STORE}/{key}", local)
        self.stats = Counts("rows", "remote_rows", "bytes_received", "colocated_rows")
        self.cache: FeatureCache | None = None
        group.barrier("feature stores registered")

    def attach_cache(self, cache: FeatureCache | None) -> None:
        """Serve the rows ``cache`` holds from it (read-only node data).

        Args:
            cache: the cache of remote rows (see `build_cache`); None: no cache from now on.
        """
        self.cache = cache

    def row_nbytes(self, group: Any, name: str) -> int:
        """Bytes of one row of ``group``/``name``.

        Args:
            group: a node type, canonical edge type, or PyG's ``None``/``(None, None)``.
            name: the tensor's name.

        Returns:
            The size of one row in bytes.

        Raises:
            KeyError: no such group or tensor.
        """
        dtype, shape = self._spec(self._key(TensorAttr(group, name)))
        return int(np.prod(shape, dtype=np.int64)) * torch.empty((), dtype=dtype).element_size()

    def remote(self, parts: np.ndarray) -> np.ndarray:
        """Which of the owning partitions ``parts`` are read over RPC (neither this process's nor co-located).

        Args:
            parts: runtime partitions, one per row.

        Returns:
            A boolean mask: True where the row is read over RPC.
        """
        far = parts != self.part_id
        return far & ~np.isin(parts, list(self.near)) if self.near else far

    def _owner_parts(self, group: Group, ids: np.ndarray) -> np.ndarray:
        if isinstance(group, tuple):
            return self.book.eid2partid(ids, group).numpy()
        return self.book.nid2partid(ids, group).numpy()

    def has(self, group: Any, name: str) -> bool:
        """Whether this store holds tensor ``group``/``name``.

        Args:
            group: a node type, canonical edge type, or PyG's ``None``/``(None, None)``.
            name: the tensor's name.

        Returns:
            True when the tensor can be read.
        """
        return self.get_tensor_size(group, name) is not None

    def _read(self, group: Group, name: str, rows: Rows) -> torch.Tensor:
        """Stored rows, from their owners."""
        ids = rows if isinstance(rows, torch.Tensor) else torch.arange(self.counts[group])[rows].view(-1)
        got = self._lookup_stored([(group, name, ids)], STORED)[0]
        return got[0] if isinstance(rows, int) else got

    def is_sparse(self, group: Any, name: str) -> bool:
        """Whether node feature ``group``/``name`` is held as CSR and not written in this object's overlay.

        A feature is CSR in every partition or in none.

        Args:
            group: a node type, or PyG's ``None``.
            name: the feature's name.

        Returns:
            True when reads of it can use `lookup_nonzeros`.

        Raises:
            KeyError: no such group or tensor.
        """
        key = self._key(TensorAttr(group, name))
        return key not in self._written and self.local.stored_is_sparse(*key)

    def lookup_nonzeros(self, group: Any, name: str, ids: Any) -> CSRRows:
        """The rows of a CSR node feature for global per-type ``ids``, in the order asked, as CSR.

        Only their non-zeros are read and sent (the remote-feature cache, which holds dense rows, is not
        used).

        Args:
            group: a node type, or PyG's ``None``.
            name: the feature's name.
            ids: global per-type node IDs (tensor, array or list).

        Returns:
            The rows as CSR.

        Raises:
            KeyError: no such group or tensor.
            InputError: the feature was written in this object's overlay (read it dense, with `lookup`), or
                IDs that are not integers.
            IDRangeError: an ID out of range.
        """
        group, name = self._key(TensorAttr(group, name))
        if (group, name) in self._written:
            raise InputError(f"{group!r}/{name!r} was written in this store's overlay: read its rows dense (lookup)")
        ids_np = as_id_array(ids, f"IDs of {group!r}")
        width = int(self.schema[(group, name)][1][0])
        parts = self._owner_parts(group, ids_np)
        self.stats.add(rows=int(ids_np.shape[0]))

        def read(pos: np.ndarray, store: LocalFeatureStore = self.local) -> tuple[torch.Tensor, ...]:
            return store.nonzeros_from_global_id(group, name, ids_np[pos])

        pieces = by_owner(
            self.group,
            parts,
            self.book.num_partitions(),
            read,
            remote=_serve_nonzeros,
            args=lambda pos: (self.key, group, name, torch.from_numpy(ids_np[pos])),
            what=f"feature {group!r}/{name!r}",
            near={p: partial(read, store=s) for p, s in self.near.items()},
        )
        for pos, got in pieces:
            self._count_received(pos, parts, got)
        return joined(pieces, ids_np.shape[0], width)

    def _count_received(self, pos: np.ndarray, parts: np.ndarray, tensors: tuple[torch.Tensor, ...]) -> None:
        """Count the rows at ``pos`` and the bytes of ``tensors`` (their answer) when another partition sent them
        (rows read from a co-located partition are counted apart)."""
        if not pos.size or parts[pos[0]] == self.part_id:
            return
        if int(parts[pos[0]]) in self.near:
            self.stats.add(colocated_rows=int(pos.size))
        else:
            self.stats.add(remote_rows=int(pos.size), bytes_received=sum(t.numel() * t.element_size() for t in tensors))

    def lookup(self, group: Any, name: str, ids: Any, wire: str = STORED) -> torch.Tensor:
        """Rows of feature ``name`` of ``group`` for global per-type ``ids``, in the order asked.

        Args:
            group: a node type, canonical edge type, or PyG's ``None``/``(None, None)``.
            name: the feature's name.
            ids: global per-type IDs (tensor, array or list).
            wire: how dense rows from other processes travel: ``stored``, or ``float16``/``bfloat16``
                (floats rounded to half precision on the way, integers narrowed exactly; see
                `graphshard.distributed.transport.wire`); rows of this process and CSR features are read as
                stored.

        Returns:
            The rows, dense, in the stored dtype.

        Raises:
            KeyError: no such group or tensor.
            InputError: an unknown ``wire``, or IDs that are not integers.
            IDRangeError: an ID out of range.
        """
        return self.lookup_many([(group, name, ids)], wire)[0]

    def lookup_many(
        self, asks: list[tuple[Any, str, Any]], wire: str = STORED, allocate: Allocate | None = None
    ) -> list[torch.Tensor]:
        """`lookup` of every ``(group, name, ids)`` of ``asks``, with one request per owning partition.

        The asks may be of any groups and names: a batch's features and labels of every node type cost one
        round trip per owner for all of them together. Tensors written in this object's overlay are read
        from it.

        Args:
            asks: ``(group, name, ids)`` triples, as the arguments of `lookup`.
            wire: how dense rows from other processes travel (as for `lookup`).
            allocate: ``allocate(shape, dtype)`` gives the tensor dense rows are gathered in, e.g. reused
                pinned buffers of a batch bound for a GPU (see `graphshard.device.buffers`); None: new
                tensors.

        Returns:
            The rows of each ask, in the order of ``asks``.

        Raises:
            KeyError: no such group or tensor.
            InputError: an unknown ``wire``, or IDs that are not integers.
            IDRangeError: an ID out of range.
        """
        check_wire(wire)
        keys = [self._key(TensorAttr(group, name)) for group, name, _ in asks]
        stored = iter(
            self._lookup_stored(
                [(*k, ids) for k, (_, _, ids) in zip(keys, asks) if k not in self._written], wire, allocate
            )
        )
        return [
            self._lookup_written(k, ids) if k in self._written else next(stored) for k, (_, _, ids) in zip(keys, asks)
        ]

    def _lookup_written(self, key: tuple[Group, str], ids: Any) -> torch.Tensor:
        """Rows of global per-type ``ids`` of a tensor written in the overlay (stored rows it did not
        replace come from their owners)."""
        rows = torch.from_numpy(as_id_array(ids, f"IDs of {key[0]!r}"))
        return self._read_key(key, as_rows(rows, self._count(key[0]), f"{key[0]!r}/{key[1]!r}"))

    def _lookup_stored(
        self, asks: list[tuple[Any, str, Any]], wire: str, allocate: Allocate | None = None
    ) -> list[torch.Tensor]:
        """:meth:`lookup_many` of stored tensors only."""
        plans = [self._plan(*ask) for ask in asks]
        sizes = [p.asked.shape[0] for p in plans]
        which = np.repeat(np.arange(len(plans)), sizes)  # flat position -> ask; positions are ask-major
        starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        parts = np.concatenate([p.parts for p in plans]) if plans else np.empty(0, dtype=np.int64)

        def split(pos: np.ndarray) -> list[tuple[int, np.ndarray]]:  # (ask, positions within its asked IDs)
            if len(plans) == 1:  # one ask (a batch's features of a homogeneous graph): nothing to split
                return [(0, pos)] if pos.size else []
            cut = np.flatnonzero(np.diff(which[pos])) + 1
            return [(int(which[c[0]]), c - starts[which[c[0]]]) for c in np.split(pos, cut) if c.size]

        # dense rows read in-process go in place
        outs = [None if p.sparse else self._rows_for(p, allocate) for p in plans]

        def local(pos: np.ndarray, store: LocalFeatureStore = self.local) -> list:  # dense rows: in place (None)
            return [self._read_local(store, plans[a], sub, outs[a]) for a, sub in split(pos)]

        def args(pos: np.ndarray) -> tuple:
            items = [
                (plans[a].group, plans[a].name, torch.from_numpy(plans[a].asked[sub]), plans[a].sparse)
                for a, sub in split(pos)
            ]
            return self.key, items, wire

        what = ", ".join(f"{p.group!r}/{p.name!r}" for p in plans)
        near = {p: partial(local, store=s) for p, s in self.near.items()}
        pieces = by_owner(
            self.group,
            parts,
            self.book.num_partitions(),
            local,
            remote=_serve_many,
            args=args,
            what=f"feature {what}",
            near=near,
        )
        got: list[list[tuple[np.ndarray, Any]]] = [[] for _ in plans]
        for pos, answers in pieces:
            for (a, sub), answer in zip(split(pos), answers):
                got[a].append((sub, answer))
        return [self._assemble(plan, got[a], outs[a]) for a, plan in enumerate(plans)]

    def _plan(self, group: Any, name: str, ids: Any) -> _Ask:
        """What one ask needs: its rows' owners, and which rows the cache already holds."""
        group, name = self._key(TensorAttr(group, name))
        ids_np = as_id_array(ids, f"IDs of {group!r}")
        parts = self._owner_parts(group, ids_np)
        self.stats.add(rows=int(ids_np.shape[0]))
        ask = _Ask(group, name, ids_np, parts, sparse=self.local.stored_is_sparse(group, name))
        if self.cache is not None and not isinstance(group, tuple):
            hit_pos, hit_rows, todo = self.cache.split(group, name, ids_np, self.remote(parts))
            ask.served = [(hit_pos, hit_rows)] if hit_pos.size else []
            if todo is not None:  # None: the cache served none of them, every row is still to fetch
                ask.todo, ask.asked, ask.parts = todo, ids_np[todo], parts[todo]
        return ask

    def _rows_for(self, ask: _Ask, allocate: Allocate | None = None) -> torch.Tensor:
        """Uninitialised rows for every ID of ``ask`` (from ``allocate``, by default new)."""
        dtype, row_shape = self.schema[(ask.group, ask.name)]
        shape = (ask.ids.shape[0], *row_shape)
        return torch.empty(shape, dtype=dtype) if allocate is None else allocate(shape, dtype)

    @staticmethod
    def _read_local(store: LocalFeatureStore, ask: _Ask, sub: np.ndarray, out: torch.Tensor | None) -> Any:
        """A CSR feature's non-zeros; dense rows go straight to their places in ``out`` (returns None)."""
        if out is None:
            return store.nonzeros_from_global_id(ask.group, ask.name, ask.asked[sub])
        store.stored_into(ask.group, ask.name, ask.asked[sub], out, at=sub if ask.todo is None else ask.todo[sub])
        return None

    def _assemble(self, ask: _Ask, pieces: list[tuple[np.ndarray, Any]], out: torch.Tensor | None) -> torch.Tensor:
        """The ask's rows in the order asked: ``out`` (dense; rows read in-process already in place) completed
        with each other owner's answer and the cache's hits, or a CSR feature's rows made dense."""
        dtype, row_shape = self.schema[(ask.group, ask.name)]
        n = ask.ids.shape[0]
        if out is None:
            if ask.todo is None and len(pieces) == 1 and pieces[0][0].shape[0] == n and ask.parts[0] == self.part_id:
                counts, cols, vals = pieces[0][1]
                return densify(counts, cols, vals, int(row_shape[0]))  # local, in order
            out = self._rows_for(ask)
        for pos, got in pieces:
            if got is None:  # read in-process, in place
                self._count_received(pos, ask.parts, ())
                continue
            received = got if isinstance(got, tuple) else (got,)
            if isinstance(got, tuple):  # a CSR feature's non-zeros
                counts, cols, vals = got
                got = densify(counts, cols, vals, int(row_shape[0]))
            put_rows(out, torch.from_numpy(pos if ask.todo is None else ask.todo[pos]), unpack(got, dtype))
            self._count_received(pos, ask.parts, received)
        for pos, got in ask.served:
            put_rows(out, torch.from_numpy(pos), got)
        return out


@dataclass
class _Ask:
    """One feature read of :meth:`DistFeatureStore.lookup_many`: global per-type ``ids`` of ``group``/``name``
    owned by ``parts``; ``asked`` (owned by ``parts``) are those at positions ``todo`` not in the cache
    (``todo`` None: all), ``served`` the cache's ``(positions, rows)``."""

    group: Any
    name: str
    ids: np.ndarray
    parts: np.ndarray
    _: KW_ONLY
    sparse: bool
    asked: np.ndarray = None  # type: ignore[assignment]
    todo: np.ndarray | None = None
    served: list = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.asked is None:
            self.asked = self.ids

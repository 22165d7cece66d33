"""``LocalGraphStore``: one partition's edges among its own nodes, on PyG's ``GraphStore`` interface.

Node and edge numbering is :class:`~graphshard.distributed.stores.local.LocalFeatureStore`'s: rows of
the partition's own items, so every node PyG's loaders reach has feature rows, and every ``e_id`` they
report addresses edge features (:meth:`LocalGraphStore.csc` & co. return each edge's feature row as
PyG's ``perm``, which PyG's loaders turn into ``e_id``). Puts and removes of edge indices change the
store object only (an in-memory overlay), never the partition's files.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any

import torch
from torch_geometric.data.graph_store import EdgeAttr, EdgeLayout, GraphStore
from torch_geometric.utils.sparse import ptr2index

from ...errors import InputError
from ...format.load import Partition
from ...graph import EType
from ...sampling.neighbor import check_aligned, check_csc
from .base import TypeNames, own_ranges

Pair = tuple[torch.Tensor, torch.Tensor]
_PREFERENCE = [EdgeLayout.CSC, EdgeLayout.COO, EdgeLayout.CSR]  # what to convert from when asked for another


@dataclass
class _Entry:
    value: Pair | None  # None: the partition's own CSC, built on first use
    is_sorted: bool
    size: tuple[int, int] | None
    edge_ids: torch.Tensor | None = None  # feature row of each edge, in this layout's order
    _: KW_ONLY
    stored: bool = False  # the partition's own CSC (the only entries with a COO view)
    coo_col: torch.Tensor | None = None  # the stored CSC's destinations, one per edge: its COO view (on request)


class LocalGraphStore(GraphStore):
    """One partition's edges among its own nodes, a PyG ``GraphStore``.

    Per canonical edge type, the partition's edges whose two ends are its own nodes, in the layout the
    partition stores them: CSC (``(row, colptr)``, sorted by destination, served from the
    memory-mapped arrays as int64, which PyG's samplers want: zero-copy for one partition of a single-type
    graph stored in int64, converted once where a compact partition stores int32),
    ``size`` = the partition's own (source, destination) node counts. A single-type graph's edge type is
    ``None``, as PyG expects.

    ``get_edge_index(edge_type, "coo")`` of an edge type whose stored CSC is held (and no COO was put)
    returns its **COO view**, made on request and kept: ``(row, col)`` in the CSC's order (sorted by
    destination), so edge ``i`` of the view is edge ``i`` of the CSC and ``edge_ids(edge_type, "coo")``
    gives the same feature rows; `get_all_edge_attrs` lists what is held, not this view. ``coo()``
    returns the same arrays with those rows as ``perm``. CSR is converted by PyG's ``csr()`` (with ``perm``).

    Puts (any layout, e.g. PyG's ``csr(store=True)``) and removes are an in-memory overlay: they change this
    object only, never the partition's files nor other processes' stores; removing a stored edge type's
    CSC hides it (and its COO view) from this object. Several layouts are kept per edge type; a layout or
    type not held raises ``KeyError``. Puts are checked (`InputError` naming the edge type): two
    1-D integer tensors, pointers that start at 0, never decrease and end at the edge count, and for an
    edge type of the graph, node IDs and ``size`` within the partition's own node counts (every node of
    a batch must have feature rows). ``is_sorted`` is the truth (checked on put).

    Args:
        part: the loaded partition (`load_partition`).

    Raises:
        InputError: the partition's CSC arrays are malformed or not aligned with its node and edge data.
    """

    def __init__(self, part: Partition):
        super().__init__()
        book, g = part.partition_book, part.graph
        self.part_id = book.partid if book.partid is not None else 0
        where = f"partition {self.part_id}"
        check_csc(g.indptr.numpy(), g.indices.numpy(), where)  # a bad index would wrap around silently below
        check_aligned(
            where,
            g.num_nodes,
            g.num_edges,
            {
                "node/_ID": g.ndata["_ID"].numpy(),
                "edge/_TYPE": g.edata["_TYPE"].numpy(),
                "edge/_ID": g.edata["_ID"].numpy(),
            },
        )
        self.types = TypeNames(book.ntypes, book.canonical_etypes)
        self.ranges = own_ranges(book, self.part_id)
        self._graph = g
        self._base = int(g.ndata["_ID"][0]) if g.num_nodes else 0  # homogeneous ID of local node 0
        self._entries: dict[tuple[Any, EdgeLayout], _Entry] = {
            (et, EdgeLayout.CSC): _Entry(None, True, (self.ranges[et[0]].size, self.ranges[et[2]].size), stored=True)
            for et in self.types.etypes
        }

    # -- the partition's own edges -----------------------------------------------------------------
    def _native(self, et: EType) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(row, colptr, edge rows)`` of edge type ``et`` among own nodes, in the partition's CSC order."""
        g, r = self._graph, self.types.etypes.index(et)
        src_range, dst_range, e_range = self.ranges[et[0]], self.ranges[et[2]], self.ranges[et]
        if dst_range.size == 0:
            none = torch.zeros(0, dtype=torch.int64)
            return none, torch.zeros(1, dtype=torch.int64), none
        lo_s, lo_d = src_range.homo - self._base, dst_range.homo - self._base  # local IDs of row 0
        ptr = g.indptr[lo_d : lo_d + dst_range.size + 1]  # in-edges of own destinations of this type
        a, b = int(ptr[0]), int(ptr[-1])
        src, eid = g.indices[a:b], g.edata["_ID"][a:b]  # as stored (int32 in compact partitions), memory-mapped
        keep = (g.edata["_TYPE"][a:b] == r) & (src >= lo_s) & (src < lo_s + src_range.size)
        if bool(keep.all()):  # views of the memory-mapped arrays wherever no shift is needed
            return src - lo_s if lo_s else src, ptr - a if a else ptr, eid - e_range.homo if e_range.homo else eid
        csum = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(keep, 0, dtype=torch.int64)])
        return src[keep] - lo_s, csum[ptr - a], eid[keep] - e_range.homo

    def _value(self, key: tuple[Any, EdgeLayout]) -> Pair:
        """The edge index of ``key`` as PyG takes it: int64 (compact partitions store int32; PyG's samplers
        and ``perm`` indexing want int64), converted once and kept."""
        entry = self._entries[key]
        if entry.value is None:
            row, colptr, ids = self._native(key[0])
            entry.edge_ids = ids.to(torch.int64)
            entry.value = (row.to(torch.int64), colptr.to(torch.int64))
        return entry.value

    def _type_key(self, edge_type: Any, stored_only: bool) -> Any:
        try:
            return self.types.etype(edge_type)
        except KeyError:
            if stored_only and not any(k[0] == edge_type for k in self._entries):
                raise KeyError(
                    f"no edge type {edge_type!r} in this graph store; it has "
                    f"{sorted({str(self.types.public_etype(k[0])) for k in self._entries})}"
                ) from None
            return edge_type

    def edge_ids(self, edge_type: Any, layout: str | EdgeLayout = "csc") -> torch.Tensor | None:
        """The edge-feature row (``LocalFeatureStore`` edge index) of each edge of a stored layout, in its order.

        Args:
            edge_type: the edge type (``None`` in a single-type graph).
            layout: the layout: ``"csc"``, ``"coo"`` (the COO view) or ``"csr"``.

        Returns:
            The feature row of each edge; None for edges put by the user.

        Raises:
            KeyError: no such edge type or layout held.
        """
        key = (self._type_key(edge_type, True), EdgeLayout(layout))
        self._get_edge_index(EdgeAttr(edge_type, key[1]))
        if key not in self._entries:  # the COO view: the CSC's edges, in its order
            key = (key[0], EdgeLayout.CSC)
        return self._entries[key].edge_ids

    def _has_view(self, et: Any) -> bool:
        """Whether ``et`` has a COO view: its stored CSC is held (not removed, nor replaced by a put)."""
        entry = self._entries.get((et, EdgeLayout.CSC))
        return entry is not None and entry.stored

    def _coo_view(self, et: Any) -> Pair:
        """``(row, col)`` of ``et``'s CSC, one entry per edge in the CSC's order (made once, then kept)."""
        entry = self._entries[(et, EdgeLayout.CSC)]
        row, colptr = self._value((et, EdgeLayout.CSC))
        if entry.coo_col is None:
            entry.coo_col = ptr2index(colptr.to(torch.int64), row.numel()) if row.numel() else row.new_zeros(0)
        return row, entry.coo_col

    def _checked(self, edge_index: Any, edge_attr: EdgeAttr, et: Any) -> Pair:
        """``edge_index`` as two 1-D integer tensors, checked for ``edge_attr``'s layout (see the class doc)."""
        what = f"edge index of {edge_attr.edge_type!r} ({edge_attr.layout.value})"
        try:
            row, col = (torch.as_tensor(t) for t in edge_index)
        except (TypeError, ValueError, RuntimeError):
            raise InputError(f"{what}: expected a pair of index tensors, got {type(edge_index).__name__}") from None
        if row.dim() != 1 or col.dim() != 1:
            raise InputError(f"{what} must be two 1-D tensors, got shapes {tuple(row.shape)} and {tuple(col.shape)}")
        if (row.numel() and row.is_floating_point()) or (col.numel() and col.is_floating_point()):
            raise InputError(f"{what} must hold integers, got {row.dtype} and {col.dtype}")
        own = (self.ranges[et[0]].size, self.ranges[et[2]].size) if et in self.types.etypes else None
        if own is not None and edge_attr.size is not None and tuple(edge_attr.size) != own:
            raise InputError(f"{what}: size {tuple(edge_attr.size)} is not the partition's own node counts {own}")
        layout = edge_attr.layout
        if layout in (EdgeLayout.CSR, EdgeLayout.CSC):
            ptr, ids = (row, col) if layout == EdgeLayout.CSR else (col, row)
            _check_ptr(ptr, ids.numel(), what, None if own is None else own[layout == EdgeLayout.CSC])
        if own is not None:
            ends = [(row, own[0], "source")] if layout != EdgeLayout.CSR else []
            _check_ids(ends + ([(col, own[1], "destination")] if layout != EdgeLayout.CSC else []), what)
        return row, col

    # -- PyG interface -------------------------------------------------------------------------------
    def _put_edge_index(self, edge_index: Any, edge_attr: EdgeAttr) -> bool:
        et = self._type_key(edge_attr.edge_type, False)
        row, col = self._checked(edge_index, edge_attr, et)
        layout = edge_attr.layout
        if layout == EdgeLayout.COO and row.numel() != col.numel():
            raise InputError(
                f"COO edge index of {edge_attr.edge_type!r}: row and col differ in length "
                f"({row.numel()} and {col.numel()})"
            )
        is_sorted = layout == EdgeLayout.CSC or (layout == EdgeLayout.COO and bool((col[1:] >= col[:-1]).all()))
        size = tuple(edge_attr.size) if edge_attr.size is not None else None
        pair = (row.to(torch.int64), col.to(torch.int64))  # what PyG reads back is int64, whatever was put
        self._entries[(et, layout)] = _Entry(pair, is_sorted, size)
        return True

    def _get_edge_index(self, edge_attr: EdgeAttr) -> Pair:
        et = self._type_key(edge_attr.edge_type, True)
        key = (et, edge_attr.layout)
        if key not in self._entries and edge_attr.layout == EdgeLayout.COO and self._has_view(et):
            return self._coo_view(et)
        if key not in self._entries:
            have = [k[1].value for k in self._entries if k[0] == et]
            raise KeyError(
                f"no {edge_attr.layout.value!r} edge index of edge type {edge_attr.edge_type!r} in this "
                f"graph store; it has {have}"
            )
        return self._value(key)

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        return self._entries.pop((self._type_key(edge_attr.edge_type, False), edge_attr.layout), None) is not None

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        return [
            EdgeAttr(self.types.public_etype(et), layout, e.is_sorted, e.size)
            for (et, layout), e in self._entries.items()
        ]

    def _edges_to_layout(self, layout: EdgeLayout, edge_types: list[Any] | None = None, store: bool = False):
        """PyG's ``coo()``/``csr()``/``csc()``: each type from the requested layout when stored (no
        conversion), else from the partition's own CSC; ``perm`` is each returned edge's feature row."""
        layouts: dict[Any, list[EdgeLayout]] = {}
        for et, lay in self._entries:
            layouts.setdefault(et, []).append(lay)
        if edge_types is not None:
            layouts = {k: layouts[k] for k in dict.fromkeys(self._type_key(t, True) for t in edge_types)}
        rows, cols, perms = {}, {}, {}
        for et, have in layouts.items():
            src = layout if layout in have else min(have, key=_PREFERENCE.index)
            public = self.types.public_etype(et)
            entry = self._entries[(et, src)]
            self._value((et, src))
            row, col, perm = self._edge_to_layout(EdgeAttr(public, src, entry.is_sorted, entry.size), layout, store)
            if entry.edge_ids is not None:
                perm = entry.edge_ids if perm is None else entry.edge_ids[perm]
                if store and src != layout:
                    self._entries[(et, layout)].edge_ids = perm
            rows[public], cols[public], perms[public] = row, col, perm
        if list(rows) == [None]:  # a single-type graph: PyG's homogeneous form
            return rows[None], cols[None], perms[None]
        return rows, cols, perms


def _check_ptr(ptr: torch.Tensor, num_edges: int, what: str, count: int | None) -> None:
    """A CSR/CSC pointer: starts at 0, never decreases, ends at ``num_edges``; ``count + 1`` entries if given."""
    if count is not None and ptr.numel() != count + 1:
        raise InputError(
            f"{what}: the pointer needs {count + 1} entries (the partition's own nodes of that type "
            f"+ 1), got {ptr.numel()}"
        )
    if ptr.numel() == 0 or int(ptr[0]) != 0 or int(ptr[-1]) != num_edges or bool((ptr[1:] < ptr[:-1]).any()):
        raise InputError(f"{what}: the pointer must start at 0, never decrease and end at the edge count {num_edges}")


def _check_ids(ends: list[tuple[torch.Tensor, int, str]], what: str) -> None:
    """Each ``(node IDs, count, which end)`` lies in ``[0, count)``: the partition's own nodes of that type."""
    for ids, count, end in ends:
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= count):
            raise InputError(
                f"{what}: {end} IDs must lie in [0, {count}) (the partition's own nodes of that type), "
                f"got [{int(ids.min())}, {int(ids.max())}]"
            )

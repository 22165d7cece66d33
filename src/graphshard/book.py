"""The partition book: vectorised ID mapping between global, per-partition and per-type spaces.

Every partition owns one contiguous range of new homogeneous node (edge) IDs, and inside it every
type one contiguous sub-range (docs/format.md, "ID rules"), so all lookups are ``searchsorted`` over range bounds.
Methods take tensors, arrays or lists and return int64 tensors; IDs out of range raise
`IDRangeError`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, overload

import numpy as np
import torch

from .errors import IDRangeError, InputError
from .graph import DEFAULT_NTYPE, EType, etype_str, parse_etype
from .ids import as_id_array, check_range

OriginalLoader = Callable[[str, str], np.ndarray]


class _Space:
    """One ID space (nodes or edges): per-type, per-partition ranges. With ``factor > 1`` the partitions
    seen from outside are groups of ``factor`` consecutive stored partitions (each group one contiguous
    range of IDs, and of per-type IDs); type look-ups still use the stored partitions' ranges."""

    def __init__(
        self, kind: str, types: Sequence[str], ranges: dict[str, np.ndarray], num_parts: int, *, factor: int = 1
    ):
        self.kind, self.types, self.num_parts, self.factor = kind, list(types), num_parts // factor, factor
        self.type_id = {t: i for i, t in enumerate(self.types)}
        nt = len(self.types)
        # flat[(p * nt + t)] = [start, end) of type t in partition p; ordered, tiling [0, total)
        flat = np.zeros((num_parts * nt, 2), dtype=np.int64)
        for t, name in enumerate(self.types):
            flat[t::nt] = ranges[name]
        self.flat = flat
        self.starts = flat[:, 0]
        self.total = int(flat[-1, 1]) if flat.size else 0
        sizes = flat[:, 1] - flat[:, 0]
        # typed[t] = cumulative per-type counts over partitions (P + 1)
        self.typed = np.zeros((nt, num_parts + 1), dtype=np.int64)
        for t in range(nt):
            np.cumsum(sizes[t::nt], out=self.typed[t, 1:])
        self.part_bounds = np.append(flat[::nt, 0], self.total) if nt else np.zeros(num_parts + 1, np.int64)

    def tid(self, name: str) -> int:
        if name not in self.type_id:
            raise InputError(f"unknown {self.kind} type {name!r}; known: {self.types}")
        return self.type_id[name]

    def check_part(self, part_id: int) -> int:
        if not 0 <= int(part_id) < self.num_parts:
            raise IDRangeError(f"partition ID {part_id} is out of range [0, {self.num_parts})")
        return int(part_id)

    def homo_to_slot(self, ids: np.ndarray) -> np.ndarray:
        check_range(ids, self.total, f"homogeneous {self.kind} ID")
        return np.searchsorted(self.starts, ids, side="right") - 1

    def part_of(self, ids: np.ndarray, type_name: str | None) -> np.ndarray:
        return self._stored_part(ids, type_name) // self.factor

    def _stored_part(self, ids: np.ndarray, type_name: str | None) -> np.ndarray:
        from .ranges import locate  # compiled: loaded with the first look-up, not with the book

        if type_name is None:
            return locate(ids, self.part_bounds, f"homogeneous {self.kind} ID")
        return locate(ids, self.typed[self.tid(type_name)], f"{self.kind} ID of type {type_name!r}")

    def to_per_type(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        slot = self.homo_to_slot(ids)
        nt = len(self.types)
        p, t = slot // nt, slot % nt
        return t, ids - self.starts[slot] + self.typed[t, p]

    def to_homo(self, ids: np.ndarray, type_name: str) -> np.ndarray:
        t = self.tid(type_name)
        p = self._stored_part(ids, type_name)
        return self.flat[p * len(self.types) + t, 0] + (ids - self.typed[t, p])

    def part_range(self, part_id: int, type_name: str | None) -> tuple[int, int]:
        lo, hi = self.check_part(part_id) * self.factor, (part_id + 1) * self.factor
        bounds = self.part_bounds if type_name is None else self.typed[self.tid(type_name)]
        return int(bounds[lo]), int(bounds[hi])

    def part_ids(self, part_id: int, type_name: str | None) -> np.ndarray:
        return np.arange(*self.part_range(part_id, type_name), dtype=np.int64)

    def to_local(self, ids: np.ndarray, part_id: int, type_name: str | None) -> np.ndarray:
        p = self.check_part(part_id)
        owner = self.part_of(ids, type_name)
        if (owner != p).any():
            bad = int(ids[np.argmax(owner != p)])
            raise IDRangeError(
                f"{self.kind} ID {bad} belongs to partition {int(owner[np.argmax(owner != p)])}, not {p}"
            )
        lo = p * self.factor
        base = self.part_bounds[lo] if type_name is None else self.typed[self.tid(type_name), lo]
        return ids - base


def _tensor(arr: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(arr, dtype=np.int64))


class RangePartitionBook:
    """Maps node and edge IDs of a partitioned graph (new IDs, as written by ``partition_graph``).

    ``ntype``/``etype`` arguments default to the homogeneous space; pass a type name to work with
    per-type IDs of that type (as DGL's partition book does). Usually made by ``load_partition_book``.

    Args:
        num_parts: the number of stored partitions.
        ntypes: the node types, in the type order.
        etypes: the canonical edge types (``src:rel:dst``), in the type order.
        node_map: node type → ``(num_parts, 2)`` array: the ``[start, end)`` of the type's homogeneous
            node IDs in each stored partition (the config's ``node_map``).
        edge_map: edge type → ``(num_parts, 2)`` array, likewise for edge IDs.
        part_id: the partition this process holds, if any (the ``partid`` attribute).
        original_loader: ``(kind, type name)`` → the table of original per-type IDs by new per-type ID
            (``kind`` is ``"node"`` or ``"edge"``); None: original IDs cannot be asked for.
        group: every ``group`` consecutive stored partitions are seen as one partition (see `grouped`).

    Raises:
        InputError: ``group`` is below 1 or does not divide ``num_parts``.
    """

    def __init__(
        self,
        num_parts: int,
        ntypes: Sequence[str],
        etypes: Sequence[str],
        node_map: dict[str, np.ndarray],
        *,
        edge_map: dict[str, np.ndarray],
        part_id: int | None = None,
        original_loader: OriginalLoader | None = None,
        group: int = 1,
    ):
        if group < 1 or num_parts % group:
            raise InputError(f"cannot group {num_parts} partitions by {group}")
        self._nodes = _Space("node", ntypes, node_map, num_parts, factor=group)
        self._edges = _Space("edge", etypes, edge_map, num_parts, factor=group)
        self._args = (num_parts, list(ntypes), list(etypes), node_map)
        self._edge_map = edge_map
        self.partid = part_id
        self._loader = original_loader
        self._orig_cache: dict[tuple[str, str], np.ndarray] = {}
        self._inverse_cache: dict[tuple[str, str], np.ndarray] = {}

    def set_original_loader(self, loader: OriginalLoader) -> None:
        """Set where original ID tables come from from now on (e.g. over RPC for partitions on other hosts).

        Args:
            loader: ``(kind, type name)`` → the table of original per-type IDs by new per-type ID
                (``kind`` is ``"node"`` or ``"edge"``).
        """
        self._loader = loader

    def grouped(self, group: int, part_id: int | None = None) -> RangePartitionBook:
        """This book with every ``group`` consecutive stored partitions seen as one partition.

        What one process serves when it serves several: partition ``q`` is stored partitions
        ``q*group ... q*group+group-1``. IDs and types are unchanged.

        Args:
            group: stored partitions per partition of the new book.
            part_id: the (grouped) partition this process holds, if any.

        Returns:
            The new book; it shares this one's original ID tables.

        Raises:
            InputError: ``group`` is below 1 or does not divide the number of stored partitions.
        """
        book = RangePartitionBook(
            *self._args, edge_map=self._edge_map, part_id=part_id, original_loader=self._loader, group=group
        )
        book._orig_cache, book._inverse_cache = self._orig_cache, self._inverse_cache
        return book

    @property
    def group(self) -> int:
        """Stored partitions per partition of this book (1 unless `grouped`)."""
        return self._nodes.factor

    # -- description ----------------------------------------------------------------------------
    def num_partitions(self) -> int:
        return self._nodes.num_parts

    @property
    def ntypes(self) -> list[str]:
        return list(self._nodes.types)

    @property
    def canonical_etypes(self) -> list[EType]:
        return [parse_etype(e) for e in self._edges.types]

    def num_nodes(self, ntype: str | None = None) -> int:
        """The number of nodes of the graph.

        Args:
            ntype: count only the nodes of this type; None: every node.

        Returns:
            The node count.

        Raises:
            InputError: ``ntype`` is not a node type of the graph.
        """
        return self._nodes.total if ntype is None else int(self._nodes.typed[self._nodes.tid(ntype), -1])

    def num_edges(self, etype: EType | str | None = None) -> int:
        """The number of edges of the graph.

        Args:
            etype: count only the edges of this type (canonical tuple or ``src:rel:dst``, or a relation
                name that names one type); None: every edge.

        Returns:
            The edge count.

        Raises:
            InputError: ``etype`` is not an edge type of the graph.
        """
        return self._edges.total if etype is None else int(self._edges.typed[self._edges.tid(self._ename(etype)), -1])

    def _nname(self, ntype: str | None) -> str | None:
        return None if ntype is None or (ntype == DEFAULT_NTYPE and self.ntypes == [DEFAULT_NTYPE]) else ntype

    @overload
    def _ename(self, etype: EType | str) -> str: ...
    @overload
    def _ename(self, etype: EType | str | None) -> str | None: ...
    def _ename(self, etype: EType | str | None) -> str | None:
        if etype is None:
            return None
        name = etype_str(etype) if isinstance(etype, tuple) else etype
        if name not in self._edges.type_id:
            matches = [e for e in self._edges.types if e.split(":")[1] == name]
            if len(matches) == 1:
                return matches[0]
        return name

    # -- partition lookups ------------------------------------------------------------------------
    def nid2partid(self, nids: Any, ntype: str | None = None) -> torch.Tensor:
        """The partition owning each node ID.

        Args:
            nids: node IDs (tensor, array, list or scalar).
            ntype: a node type: ``nids`` are per-type IDs of it; None: homogeneous IDs.

        Returns:
            The owning partition of each ID (int64).

        Raises:
            InputError: an unknown type, or IDs that are not integers.
            IDRangeError: an ID out of range.
        """
        return _tensor(self._nodes.part_of(as_id_array(nids, "node IDs"), self._nname(ntype)))

    def eid2partid(self, eids: Any, etype: EType | str | None = None) -> torch.Tensor:
        """The partition owning each edge ID.

        Args:
            eids: edge IDs (tensor, array, list or scalar).
            etype: an edge type (canonical tuple or ``src:rel:dst``, or a relation name that names one
                type): ``eids`` are per-type IDs of it; None: homogeneous IDs.

        Returns:
            The owning partition of each ID (int64).

        Raises:
            InputError: an unknown type, or IDs that are not integers.
            IDRangeError: an ID out of range.
        """
        return _tensor(self._edges.part_of(as_id_array(eids, "edge IDs"), self._ename(etype)))

    def partid2nids(self, part_id: int, ntype: str | None = None) -> torch.Tensor:
        """All node IDs owned by ``part_id``.

        Args:
            part_id: a partition of this book.
            ntype: a node type: return per-type IDs of it; None: homogeneous IDs.

        Returns:
            The IDs, ascending (int64).

        Raises:
            InputError: an unknown node type.
            IDRangeError: ``part_id`` out of range.
        """
        return _tensor(self._nodes.part_ids(part_id, self._nname(ntype)))

    def node_range(self, part_id: int, ntype: str | None = None) -> tuple[int, int]:
        """The range of node IDs ``part_id`` owns.

        Args:
            part_id: a partition of this book.
            ntype: a node type: the range of per-type IDs of it; None: of homogeneous IDs.

        Returns:
            ``(start, end)``: the partition owns IDs ``start ... end - 1``.

        Raises:
            InputError: an unknown node type.
            IDRangeError: ``part_id`` out of range.
        """
        return self._nodes.part_range(part_id, self._nname(ntype))

    def edge_range(self, part_id: int, etype: EType | str | None = None) -> tuple[int, int]:
        """The range of edge IDs ``part_id`` owns.

        Args:
            part_id: a partition of this book.
            etype: an edge type: the range of per-type IDs of it; None: of homogeneous IDs.

        Returns:
            ``(start, end)``: the partition owns IDs ``start ... end - 1``.

        Raises:
            InputError: an unknown edge type.
            IDRangeError: ``part_id`` out of range.
        """
        return self._edges.part_range(part_id, self._ename(etype))

    def partid2eids(self, part_id: int, etype: EType | str | None = None) -> torch.Tensor:
        """All edge IDs owned by ``part_id``.

        Args:
            part_id: a partition of this book.
            etype: an edge type: return per-type IDs of it; None: homogeneous IDs.

        Returns:
            The IDs, ascending (int64).

        Raises:
            InputError: an unknown edge type.
            IDRangeError: ``part_id`` out of range.
        """
        return _tensor(self._edges.part_ids(part_id, self._ename(etype)))

    def nid2localnid(self, nids: Any, part_id: int, ntype: str | None = None) -> torch.Tensor:
        """Local IDs within ``part_id`` of node IDs it owns.

        Args:
            nids: node IDs owned by ``part_id`` (tensor, array, list or scalar).
            part_id: a partition of this book.
            ntype: a node type: ``nids`` are per-type IDs of it; None: homogeneous IDs.

        Returns:
            Homogeneous IDs: the local node IDs; per-type IDs: each node's index among the partition's
            nodes of that type (int64).

        Raises:
            InputError: an unknown node type, or IDs that are not integers.
            IDRangeError: ``part_id`` or an ID out of range, or an ID another partition owns.
        """
        return _tensor(self._nodes.to_local(as_id_array(nids, "node IDs"), part_id, self._nname(ntype)))

    def eid2localeid(self, eids: Any, part_id: int, etype: EType | str | None = None) -> torch.Tensor:
        """Local edge IDs within ``part_id`` of edge IDs it owns.

        Args:
            eids: edge IDs owned by ``part_id`` (tensor, array, list or scalar).
            part_id: a partition of this book.
            etype: an edge type (canonical tuple or ``src:rel:dst``, or a relation name that names one
                type): ``eids`` are per-type IDs of it; None: homogeneous IDs.

        Returns:
            Each ID's offset from the partition's first edge ID (of the type, for per-type IDs; int64).

        Raises:
            InputError: an unknown edge type, or IDs that are not integers.
            IDRangeError: ``part_id`` or an ID out of range, or an ID another partition owns.
        """
        return _tensor(self._edges.to_local(as_id_array(eids, "edge IDs"), part_id, self._ename(etype)))

    # -- type conversions -------------------------------------------------------------------------
    def map_to_per_ntype(self, nids: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Homogeneous node IDs → ``(node type IDs, per-type node IDs)``.

        Args:
            nids: homogeneous node IDs (tensor, array, list or scalar).

        Returns:
            ``(node type IDs, per-type node IDs)`` (int64).

        Raises:
            InputError: IDs that are not integers.
            IDRangeError: an ID out of range.
        """
        t, per = self._nodes.to_per_type(as_id_array(nids, "node IDs"))
        return _tensor(t), _tensor(per)

    def map_to_per_etype(self, eids: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Homogeneous edge IDs → ``(edge type IDs, per-type edge IDs)``.

        Args:
            eids: homogeneous edge IDs (tensor, array, list or scalar).

        Returns:
            ``(edge type IDs, per-type edge IDs)`` (int64).

        Raises:
            InputError: IDs that are not integers.
            IDRangeError: an ID out of range.
        """
        t, per = self._edges.to_per_type(as_id_array(eids, "edge IDs"))
        return _tensor(t), _tensor(per)

    def map_to_homo_nid(self, nids: Any, ntype: str) -> torch.Tensor:
        """Per-type node IDs of ``ntype`` → homogeneous node IDs.

        Args:
            nids: per-type node IDs (tensor, array, list or scalar).
            ntype: their node type.

        Returns:
            The homogeneous node IDs (int64).

        Raises:
            InputError: an unknown type, or IDs that are not integers.
            IDRangeError: an ID out of range.
        """
        return _tensor(self._nodes.to_homo(as_id_array(nids, "node IDs"), ntype))

    def map_to_homo_eid(self, eids: Any, etype: EType | str) -> torch.Tensor:
        """Per-type edge IDs of ``etype`` → homogeneous edge IDs.

        Args:
            eids: per-type edge IDs (tensor, array, list or scalar).
            etype: their edge type (canonical tuple or ``src:rel:dst``, or a relation name that names one
                type).

        Returns:
            The homogeneous edge IDs (int64).

        Raises:
            InputError: an unknown type, or IDs that are not integers.
            IDRangeError: an ID out of range.
        """
        return _tensor(self._edges.to_homo(as_id_array(eids, "edge IDs"), self._ename(etype)))

    # -- original IDs -----------------------------------------------------------------------------
    def to_original(self, ntype: str, nids: Any) -> torch.Tensor:
        """Per-type new node IDs of ``ntype`` → the user's original per-type IDs.

        Args:
            ntype: the node type.
            nids: per-type new node IDs (tensor, array, list or scalar).

        Returns:
            The original per-type IDs (int64).

        Raises:
            InputError: an unknown type, IDs that are not integers, or a book without access to original
                IDs (one not made by ``load_partition_book``).
            IDRangeError: an ID out of range.
        """
        return self._to_orig("node", ntype, nids)

    def from_original(self, ntype: str, orig_ids: Any) -> torch.Tensor:
        """The user's original per-type node IDs of ``ntype`` → per-type new IDs.

        Args:
            ntype: the node type.
            orig_ids: original per-type node IDs (tensor, array, list or scalar).

        Returns:
            The per-type new IDs (int64).

        Raises:
            InputError: an unknown type, IDs that are not integers, or a book without access to original
                IDs (one not made by ``load_partition_book``).
            IDRangeError: an ID out of range.
        """
        return self._from_orig("node", ntype, orig_ids)

    def to_original_eids(self, etype: EType | str, eids: Any) -> torch.Tensor:
        """Per-type new edge IDs of ``etype`` → original per-type edge IDs.

        Args:
            etype: the edge type (canonical tuple or ``src:rel:dst``, or a relation name that names one type).
            eids: per-type new edge IDs (tensor, array, list or scalar).

        Returns:
            The original per-type edge IDs (int64).

        Raises:
            InputError: an unknown type, IDs that are not integers, or a book without access to original
                IDs (one not made by ``load_partition_book``).
            IDRangeError: an ID out of range.
        """
        return self._to_orig("edge", self._ename(etype), eids)

    def from_original_eids(self, etype: EType | str, orig_ids: Any) -> torch.Tensor:
        """Original per-type edge IDs of ``etype`` → per-type new edge IDs.

        Args:
            etype: the edge type (canonical tuple or ``src:rel:dst``, or a relation name that names one type).
            orig_ids: original per-type edge IDs (tensor, array, list or scalar).

        Returns:
            The per-type new edge IDs (int64).

        Raises:
            InputError: an unknown type, IDs that are not integers, or a book without access to original
                IDs (one not made by ``load_partition_book``).
            IDRangeError: an ID out of range.
        """
        return self._from_orig("edge", self._ename(etype), orig_ids)

    def _original(self, kind: str, type_name: str) -> np.ndarray:
        space = self._nodes if kind == "node" else self._edges
        space.tid(type_name)
        key = (kind, type_name)
        if key not in self._orig_cache:
            if self._loader is None:
                raise InputError(
                    "this partition book has no access to original IDs (build it with load_partition_book)"
                )
            self._orig_cache[key] = self._loader(kind, type_name)
        return self._orig_cache[key]

    def _to_orig(self, kind: str, type_name: str, ids: Any) -> torch.Tensor:
        table = self._original(kind, type_name)
        arr = as_id_array(ids, f"{kind} IDs")
        check_range(arr, table.shape[0], f"{kind} ID of type {type_name!r}")
        return _tensor(table[arr])

    def _from_orig(self, kind: str, type_name: str, ids: Any) -> torch.Tensor:
        key = (kind, type_name)
        if key not in self._inverse_cache:
            table = self._original(kind, type_name)
            inverse = np.empty_like(table)
            inverse[table] = np.arange(table.shape[0], dtype=np.int64)
            self._inverse_cache[key] = inverse
        inverse = self._inverse_cache[key]
        arr = as_id_array(ids, f"original {kind} IDs")
        check_range(arr, inverse.shape[0], f"original {kind} ID of type {type_name!r}")
        return _tensor(inverse[arr])


# Up to this many partitions, items are grouped by one comparison pass per partition (about 20 x faster than
# a stable sort of 50,000 owners for 2 partitions); beyond, by one stable sort.
_PASSES = 8


def positions_by_part(parts: np.ndarray, num_parts: int) -> list[tuple[int, np.ndarray]]:
    """``(partition, positions in ascending order)`` of every partition among ``parts`` (the owning
    partition of each item), in partition order."""
    if num_parts <= _PASSES:
        return [(p, pos) for p in range(num_parts) for pos in [np.flatnonzero(parts == p)] if pos.size]
    order = np.argsort(parts, kind="stable")
    bounds = np.searchsorted(parts[order], np.arange(num_parts + 1))
    return [(int(p), order[bounds[p] : bounds[p + 1]]) for p in np.flatnonzero(np.diff(bounds))]

"""HALO construction: which edges and nodes a partition holds besides its own (the HALO rule of docs/format.md).

With ``num_hops = k`` a partition holds the in-edges of its inner nodes and of every node reachable
from them backwards within ``k - 1`` hops, plus every endpoint of those edges.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

import numpy as np

from ..errors import InputError
from .homogenize import HomoView
from .kernels import gather_ranges, range_in_edges, relabel_in_place
from .relabel import Relabelling


@dataclass(frozen=True)
class OwnInEdges:
    """A partition's own edges (those into its inner nodes), grouped by destination.

    ``indptr`` is over the inner nodes; ``eids``/``src`` give each entry's new edge ID and new source ID.
    """

    indptr: np.ndarray
    eids: np.ndarray
    src: np.ndarray
    eid_base: int = 0  # eids may be positions: the new edge ID is eid_base + eids[i]


def own_in_edges(view: HomoView, rl: Relabelling, p: int) -> OwnInEdges:
    """The in-edges of partition ``p``'s inner nodes (compiled kernel, one pass over them)."""
    (lo, hi), (elo, ehi) = rl.part_nodes(p), rl.part_edges(p)
    return OwnInEdges(
        *range_in_edges(rl.perm, view.src, view.dst, rl.old2new, node_lo=lo, node_hi=hi, edge_lo=elo, edge_hi=ehi)
    )


@dataclass(frozen=True)
class InEdges:
    """Global in-adjacency over new IDs (needed only for ``num_hops > 1``):
    ``eids[indptr[v]:indptr[v+1]]`` are the new edge IDs into new node ``v``."""

    indptr: np.ndarray
    eids: np.ndarray
    view: HomoView
    rl: Relabelling

    @classmethod
    def build(cls, view: HomoView, rl: Relabelling) -> InEdges:
        indptr = np.zeros(view.num_nodes + 1, dtype=np.int64)
        eids = np.empty(view.num_edges, dtype=np.int64)
        for p in range(rl.num_parts):  # partitions tile both ID spaces, so their pieces concatenate
            own = own_in_edges(view, rl, p)
            (lo, hi), (elo, ehi) = rl.part_nodes(p), rl.part_edges(p)
            indptr[lo + 1 : hi + 1] = own.indptr[1:] + elo
            eids[elo:ehi] = own.eids
        return cls(indptr, eids, view, rl)

    def sources(self, new_eids: np.ndarray) -> np.ndarray:
        """New source ID of each new edge ID."""
        return self.rl.old2new[self.view.src[self.rl.perm[new_eids]]]


@dataclass(frozen=True)
class LocalStructure:
    """One partition's local graph before tensors are written.

    ``node_ids``: new IDs of local nodes (inner range first, then HALO nodes ascending).
    ``indptr``/``indices``: CSC over local IDs; ``eid_base + eids``: new edge ID of each entry.
    ``num_inner`` inner nodes; the first ``num_inner_edges`` edges are inner.
    """

    node_ids: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    eids: np.ndarray
    _: KW_ONLY
    num_inner: int
    num_inner_edges: int
    eid_base: int = 0


def check_hops(num_hops: int) -> None:
    """Refuse ``num_hops < 1`` (a partition must hold its inner nodes' in-edges)."""
    if isinstance(num_hops, bool) or not isinstance(num_hops, (int, np.integer)) or num_hops < 1:
        raise InputError(f"num_hops must be an integer >= 1, got {num_hops!r}")


def expand_dsts(start: int, end: int, num_hops: int, adj: InEdges | None, *, num_nodes: int) -> np.ndarray:
    """New IDs outside ``[start, end)`` whose in-edges the partition must also hold (ascending)."""
    if num_hops == 1 or adj is None:
        return np.zeros(0, dtype=np.int64)
    seen = np.zeros(num_nodes, dtype=bool)
    seen[start:end] = True
    frontier = np.arange(start, end, dtype=np.int64)
    found = []
    for _ in range(num_hops - 1):
        srcs = adj.sources(gather_ranges(adj.indptr, frontier, adj.eids))
        frontier = np.unique(srcs[~seen[srcs]])
        seen[frontier] = True
        found.append(frontier)
    return np.sort(np.concatenate(found))


@dataclass(frozen=True)
class HaloInEdges:
    """In-edges of the HALO nodes that hold them (``num_hops > 1``): ``degrees[i]`` edges for
    ``halo_dsts[i]``, listed in that order with new edge IDs ``eids`` and new source IDs ``src``."""

    halo_dsts: np.ndarray
    degrees: np.ndarray
    eids: np.ndarray
    src: np.ndarray

    @classmethod
    def empty(cls) -> HaloInEdges:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z, z)

    @classmethod
    def gather(cls, adj: InEdges, halo_dsts: np.ndarray) -> HaloInEdges:
        eids = gather_ranges(adj.indptr, halo_dsts, adj.eids)
        return cls(halo_dsts, adj.indptr[halo_dsts + 1] - adj.indptr[halo_dsts], eids, adj.sources(eids))


def local_structure(start: int, end: int, own: OwnInEdges, halo: HaloInEdges, *, scratch: np.ndarray) -> LocalStructure:
    """Local CSC of the partition owning new IDs ``[start, end)``, with the in-edges ``halo`` of the
    HALO nodes that hold theirs. ``scratch``: int64 work array of length N, reused."""
    n_inner = end - start
    eids, srcs = own.eids, own.src
    halo_dsts = halo.halo_dsts
    if halo_dsts.size:
        if own.eid_base:
            raise ValueError("HALO edges need absolute new edge IDs (eid_base = 0)")
        eids = np.concatenate([eids, halo.eids])
        srcs = np.concatenate([srcs, halo.src])
    halo_nodes = _halo_nodes(srcs, start, end, scratch.shape[0])
    node_ids = np.concatenate([np.arange(start, end, dtype=np.int64), halo_nodes])
    scratch[node_ids] = np.arange(node_ids.shape[0], dtype=np.int64)
    degrees = np.zeros(node_ids.shape[0], dtype=np.int64)
    degrees[:n_inner] = np.diff(own.indptr)
    if halo_dsts.size:
        degrees[scratch[halo_dsts]] = halo.degrees
    indptr = np.zeros(node_ids.shape[0] + 1, dtype=np.int64)
    np.cumsum(degrees, out=indptr[1:])
    indices = relabel_in_place(srcs, scratch)  # srcs is owned here (own.src is consumed)
    return LocalStructure(
        node_ids,
        indptr,
        indices,
        eids,
        num_inner=n_inner,
        num_inner_edges=int(own.eids.shape[0]),
        eid_base=own.eid_base,
    )


def _halo_nodes(srcs: np.ndarray, start: int, end: int, num_nodes: int) -> np.ndarray:
    mark = np.zeros(num_nodes, dtype=bool)
    mark[srcs] = True
    mark[start:end] = False
    return np.flatnonzero(mark).astype(np.int64, copy=False)

"""HALO construction: which edges and nodes a partition holds besides its own (DESIGN.md §3).

With ``num_hops = k`` a partition holds the in-edges of its inner nodes and of every node reachable
from them backwards within ``k - 1`` hops, plus every endpoint of those edges.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .counting_sort import gather_ranges


@dataclass(frozen=True)
class InEdges:
    """Global in-adjacency over new IDs: ``eids[indptr[v]:indptr[v+1]]`` are the new edge IDs into ``v``.

    ``perm`` maps new edge IDs to original ones, ``src`` holds original source IDs and ``old2new``
    renumbers nodes; sources are looked up on demand so no extra edge-sized array is kept.
    """

    indptr: np.ndarray
    eids: np.ndarray
    perm: np.ndarray
    src: np.ndarray
    old2new: np.ndarray

    def sources(self, new_eids: np.ndarray) -> np.ndarray:
        """New source ID of each new edge ID."""
        return self.old2new[self.src[self.perm[new_eids]]]


@dataclass(frozen=True)
class LocalStructure:
    """One partition's local graph before tensors are written.

    ``node_ids``: new IDs of local nodes (inner range first, then HALO nodes ascending).
    ``indptr``/``indices``: CSC over local IDs. ``eids``: new edge ID of each entry of ``indices``.
    ``num_inner``: number of inner nodes; ``num_inner_edges``: edges whose destination is inner
    (they come first).
    """

    node_ids: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    eids: np.ndarray
    num_inner: int
    num_inner_edges: int


def check_hops(num_hops: int) -> None:
    """Refuse ``num_hops < 1`` (a partition must hold its inner nodes' in-edges)."""
    if isinstance(num_hops, bool) or not isinstance(num_hops, (int, np.integer)) or num_hops < 1:
        raise InputError(f"num_hops must be an integer >= 1, got {num_hops!r}")


def expand_dsts(start: int, end: int, num_hops: int, adj: InEdges, num_nodes: int) -> np.ndarray:
    """New IDs outside ``[start, end)`` whose in-edges the partition must also hold (ascending)."""
    if num_hops == 1:
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


def local_structure(start: int, end: int, halo_dsts: np.ndarray, adj: InEdges, scratch: np.ndarray) -> LocalStructure:
    """Local CSC of the partition owning new IDs ``[start, end)`` whose extra in-edge holders are ``halo_dsts``.

    ``scratch`` is an int64 work array of length N (reused across partitions, contents irrelevant).
    """
    n_inner = end - start
    inner_eids = adj.eids[adj.indptr[start] : adj.indptr[end]]
    halo_eids = gather_ranges(adj.indptr, halo_dsts, adj.eids)
    eids = np.concatenate([inner_eids, halo_eids]) if halo_eids.size else inner_eids
    srcs = adj.sources(eids)
    halo = _halo_nodes(srcs, start, end, scratch.shape[0])
    node_ids = np.concatenate([np.arange(start, end, dtype=np.int64), halo])
    scratch[node_ids] = np.arange(node_ids.shape[0], dtype=np.int64)
    degrees = np.zeros(node_ids.shape[0], dtype=np.int64)
    degrees[:n_inner] = np.diff(adj.indptr[start : end + 1])
    degrees[scratch[halo_dsts]] = adj.indptr[halo_dsts + 1] - adj.indptr[halo_dsts]
    indptr = np.zeros(node_ids.shape[0] + 1, dtype=np.int64)
    np.cumsum(degrees, out=indptr[1:])
    return LocalStructure(node_ids, indptr, scratch[srcs], eids, n_inner, int(inner_eids.shape[0]))


def _halo_nodes(srcs: np.ndarray, start: int, end: int, num_nodes: int) -> np.ndarray:
    mark = np.zeros(num_nodes, dtype=bool)
    mark[srcs] = True
    mark[start:end] = False
    return np.flatnonzero(mark).astype(np.int64, copy=False)

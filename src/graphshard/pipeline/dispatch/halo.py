"""Structure and HALO: each owned partition's own in-edges (CSC over its inner nodes), and the in-edges
of the nodes within ``num_hops - 1`` backward hops, fetched hop by hop from the ranks owning them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...distributed.ranks.collectives import exchange
from ...partition.halo import HaloInEdges, OwnInEdges
from ...partition.kernels import ragged_ranges, range_in_edges
from .edge_exchange import PartEdges
from .state import DispatchState

Own = tuple[OwnInEdges, np.ndarray | None]  # CSC, and original edge IDs in its order (None when compact)
Halo = tuple[HaloInEdges, np.ndarray]  # HALO in-edges and their original edge IDs
Lookup = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
_FIELDS = ("dst", "deg", "eid", "src", "orig")


def own_structure(state: DispatchState, p: int, e: PartEdges, edge_base: int) -> Own:
    """CSC of partition ``p``'s own edges (new IDs start at ``edge_base``). With a 1-hop HALO the edge IDs
    stay compact (positions into the received arrays, int32 where they fit) and the received endpoints are
    released; deeper HALOs keep absolute IDs and the original IDs, for answering other ranks."""
    lo, hi = state.part_nodes(p)
    m = e.orig.shape[0]
    if state.opts.num_hops == 1:
        small = np.int32 if max(m, state.num_nodes) < 2**31 else np.int64
        indptr, pos, new_src = range_in_edges(
            None, e.src, e.dst, state.old2new, node_lo=lo, node_hi=hi, edge_lo=0, edge_hi=m, out_dtype=small
        )
        e.src = e.dst = np.zeros(0, dtype=e.src.dtype)  # free them (a [:0] view would keep the buffer)
        return OwnInEdges(indptr, pos, new_src, eid_base=edge_base), None
    indptr, pos, new_src = range_in_edges(
        None, e.src, e.dst, state.old2new, node_lo=lo, node_hi=hi, edge_lo=0, edge_hi=m
    )
    return OwnInEdges(indptr, pos + edge_base, new_src), e.orig[pos]


def serve_in_edges(
    asked: np.ndarray, own: dict[int, Own], part_starts: np.ndarray, node_bounds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """In-degrees and in-edges ``(new eid, new src, original eid)`` of ``asked`` nodes (new IDs, all in
    partitions of ``own``), in ``asked`` order."""
    q = np.searchsorted(part_starts, asked, side="right") - 1
    deg = np.zeros(asked.shape[0], dtype=np.int64)
    first_of = {}
    for part in np.unique(q):  # loop over partitions, not nodes
        sel = np.flatnonzero(q == part)
        local = asked[sel] - int(node_bounds[part, 0])
        indptr = own[int(part)][0].indptr
        deg[sel] = indptr[local + 1] - indptr[local]
        first_of[int(part)] = (sel, indptr[local])
    out_start = np.cumsum(deg) - deg
    rec = np.empty((int(deg.sum()), 3), dtype=np.int64)
    for part, (sel, first) in first_of.items():
        o, orig = own[part]
        assert orig is not None  # asked only with a deeper HALO, whose partitions keep original IDs (own_structure)
        src_pos = ragged_ranges(first, deg[sel])
        dst_pos = ragged_ranges(out_start[sel], deg[sel])
        rec[dst_pos, 0], rec[dst_pos, 1], rec[dst_pos, 2] = o.eids[src_pos], o.src[src_pos], orig[src_pos]
    return deg, rec


def fetch_in_edges(state: DispatchState, own: dict[int, Own], nodes: np.ndarray) -> Lookup:
    """Ask the owners of ``nodes`` (new IDs) for their in-edges, answering the other ranks' questions from
    ``own`` (a collective); returns ``lookup(asked) -> (deg, new eid, new src, original eid)``."""
    w, starts_of_part = state.ctx.world_size, state.part_starts()
    owner = state.owner_rank(np.searchsorted(starts_of_part, nodes, side="right") - 1)
    requests = exchange(state.ctx, [nodes[owner == r] for r in range(w)], "HALO requests")
    answers = [serve_in_edges(asked, own, starts_of_part, state.node_bounds) for asked in requests]
    got_deg = exchange(state.ctx, [a[0] for a in answers], "HALO degrees")
    got_rec = exchange(state.ctx, [a[1] for a in answers], "HALO in-edges")
    all_nodes = np.concatenate([nodes[owner == r] for r in range(w)])
    all_deg, all_rec = np.concatenate(got_deg), np.concatenate(got_rec)
    starts = np.cumsum(all_deg) - all_deg
    order = np.argsort(all_nodes)
    sorted_nodes = all_nodes[order]

    def lookup(asked: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        idx = order[np.searchsorted(sorted_nodes, asked)]
        rec = all_rec[ragged_ranges(starts[idx], all_deg[idx])]
        return all_deg[idx], rec[:, 0], rec[:, 1], rec[:, 2]

    return lookup


def halo_edges(state: DispatchState, own: dict[int, Own]) -> dict[int, Halo]:
    """HALO in-edges of every partition in ``own`` (a collective when ``num_hops > 1``)."""
    return expand_halo(
        own,
        state.node_bounds,
        state.num_nodes,
        state.opts.num_hops,
        fetch=lambda nodes: fetch_in_edges(state, own, nodes),
    )


def expand_halo(
    own: dict[int, Own],
    node_bounds: np.ndarray,
    num_nodes: int,
    num_hops: int,
    *,
    fetch: Callable[[np.ndarray], Lookup],
) -> dict[int, Halo]:
    """Breadth-first over in-edges: hop by hop, the in-edges of the sources not seen yet, from ``fetch``
    (called ``num_hops - 1`` times on every rank, even one owning no partition)."""
    if num_hops == 1:
        return {p: (HaloInEdges.empty(), np.zeros(0, np.int64)) for p in own}
    seen, frontier = {}, {}
    found: dict[int, dict[str, list[np.ndarray]]] = {p: {k: [] for k in _FIELDS} for p in own}
    for p in own:
        seen[p] = np.zeros(num_nodes, dtype=bool)
        seen[p][int(node_bounds[p, 0]) : int(node_bounds[p, -1])] = True
        frontier[p] = _unseen(own[p][0].src, seen[p])
    for _ in range(num_hops - 1):
        for p in own:
            seen[p][frontier[p]] = True
        lookup = fetch(np.unique(np.concatenate([frontier[p] for p in own] or [np.zeros(0, np.int64)])))
        for p in own:
            deg, eid, src, orig = lookup(frontier[p])
            for k, v in zip(_FIELDS, (frontier[p], deg, eid, src, orig)):
                found[p][k].append(v)
            frontier[p] = _unseen(src, seen[p])
    return {p: _assemble(found[p]) for p in own}


def _unseen(nodes: np.ndarray, seen: np.ndarray) -> np.ndarray:
    return np.unique(nodes[~seen[nodes]])


def _assemble(found: dict[str, list[np.ndarray]]) -> Halo:
    """The collected in-edges, grouped by destination in increasing order."""
    acc = {k: np.concatenate(v) for k, v in found.items()}
    order = np.argsort(acc["dst"], kind="stable")
    take = ragged_ranges((np.cumsum(acc["deg"]) - acc["deg"])[order], acc["deg"][order])
    return HaloInEdges(acc["dst"][order], acc["deg"][order], acc["eid"][take], acc["src"][take]), acc["orig"][take]

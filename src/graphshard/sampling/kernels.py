"""Compiled one-layer neighbour sampling over CSC in-adjacency (numba, parallel over seeds).

Randomness is counter-based (a hash of seed, seed position and draw), so results do not depend on
the number of threads. Returned positions index ``indices`` (and any edge-aligned array).
"""

from __future__ import annotations

import numba
import numpy as np

from ..jit import kernel, prefetch
from ..mixing import GOLDEN, mix64
from ..ranges import warm_up as warm_ranges  # warmed up with the sampling kernels (every rank's book uses it)
from .degrees import in_degree_table, source_counts  # warmed up with the sampling kernels (DistGraph uses them)


@kernel(inline="always")
def _rand(key: np.uint64, i: np.uint64, j: np.uint64) -> np.uint64:
    return mix64(key + i * np.uint64(GOLDEN) + j * np.uint64(0xD1B54A32D192ED03) + np.uint64(1))


@kernel(inline="always")
def _below(r: np.uint64, n: int) -> int:
    """A number in ``[0, n)`` from 64 random bits: the high 32 bits scaled by ``n`` (a multiply, not a division;
    each value's chance is off by at most ``n / 2^32``, nothing at a node's degree), ``r % n`` beyond 32 bits.
    Filling 5,000 nodes' picks (fanout 10 of about 20 in-edges) took 0.58 ms against 0.80 ms with ``r % n``."""
    if n < 4294967296:
        return int(((r >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32))
    return int(r % np.uint64(n))


@kernel(parallel=True, nogil=True)
def _candidates(starts, ends, indices, node_time, slot_time, temporal):
    """Number of eligible edges of each slot (all, or those whose source is not newer than the slot)."""
    out = np.empty(starts.shape[0], dtype=np.int64)
    for i in numba.prange(starts.shape[0]):
        lo, hi = starts[i], ends[i]
        if not temporal:
            out[i] = hi - lo
        else:
            c = 0
            for j in range(lo, hi):
                if node_time[indices[j]] <= slot_time[i]:
                    c += 1
            out[i] = c
    return out


@kernel(parallel=True, nogil=True)
def _fill(starts, ends, indices, eligible, offsets, fanouts, replace, key, node_time, slot_time, temporal, out):
    for i in numba.prange(starts.shape[0]):
        lo, hi = starts[i], ends[i]
        m, k, at = eligible[i], offsets[i + 1] - offsets[i], offsets[i]
        if k == 0:
            continue
        cand = np.empty(m if temporal else 0, dtype=np.int64)
        if temporal:
            c = 0
            for j in range(lo, hi):
                if node_time[indices[j]] <= slot_time[i]:
                    cand[c] = j
                    c += 1
        if fanouts[i] < 0 or (not replace and k == m):
            for t in range(k):
                out[at + t] = cand[t] if temporal else lo + t
        elif replace:
            for t in range(k):
                pick = _below(_rand(key, np.uint64(i), np.uint64(t)), m)
                out[at + t] = cand[pick] if temporal else lo + pick
        else:  # Floyd's algorithm: k distinct picks out of m, O(k^2) with k <= fanout
            filled = 0
            for t in range(m - k, m):
                pick = _below(_rand(key, np.uint64(i), np.uint64(t)), t + 1)
                for u in range(filled):
                    if out[at + u] == pick:
                        pick = t
                        break
                out[at + filled] = pick
                filled += 1
            for t in range(k):
                out[at + t] = cand[out[at + t]] if temporal else lo + out[at + t]


def sample_ranges(
    starts: np.ndarray,
    ends: np.ndarray,
    indices: np.ndarray,
    fanouts: np.ndarray,
    *,
    replace: bool,
    key: int,
    node_time: np.ndarray | None = None,
    slot_time: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Sample up to ``fanouts[i]`` edges from each slot ``indices[starts[i]:ends[i]]`` (``-1``: all).
    Returns ``(counts, positions)``: ``counts[i]`` edges for slot ``i``, their positions into ``indices``
    listed slot by slot.

    Without replacement a slot gets ``min(fanout, eligible)`` distinct edges; with replacement exactly
    ``fanout`` (or none when it has no eligible edge). Temporal mode keeps only edges whose source's
    ``node_time`` is ≤ the slot's ``slot_time`` (both must be given).
    """
    temporal = node_time is not None and slot_time is not None
    nt = node_time if temporal else np.zeros(1, dtype=np.int64)
    st = slot_time if temporal else np.zeros(1, dtype=np.int64)
    eligible = _candidates(starts, ends, indices, nt, st, temporal)
    if replace:
        counts = np.where(fanouts < 0, eligible, np.where(eligible > 0, fanouts, 0)).astype(np.int64)
    else:
        counts = np.where(fanouts < 0, eligible, np.minimum(eligible, fanouts)).astype(np.int64)
    offsets = np.zeros(starts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.int64)
    _fill(starts, ends, indices, eligible, offsets, fanouts, replace, np.uint64(key % 2**64), nt, st, temporal, out)
    return counts, out


def sample_layer(
    indptr: np.ndarray,
    indices: np.ndarray,
    seeds: np.ndarray,
    fanout: int,
    *,
    replace: bool,
    key: int,
    node_time: np.ndarray | None = None,
    seed_time: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sample_ranges` over the in-edges of ``seeds`` in a CSC graph, one fanout for all."""
    fanouts = np.full(seeds.shape[0], fanout, dtype=np.int64)
    return sample_ranges(
        indptr[seeds],
        indptr[seeds + 1],
        indices,
        fanouts,
        replace=replace,
        key=key,
        node_time=node_time,
        slot_time=seed_time,
    )


# How far ahead the serial kernels below ask for the cache lines they will read at random (``jit.prefetch``): the
# misses then overlap instead of each waiting for memory. Measured on one core of this machine (AMD EPYC), one
# batch's second hop on a 1M-node community graph (47,000 sampled edges of a 10M-edge partition), a fresh batch
# per call with the caches evicted before it, 200 alternated rounds: neighbour_ids 1.29 ms as a parallel loop on
# one thread, 0.84 ms serial with edges 24 ahead and HALO nodes 8 ahead (48/16, 64/24 and 96/32 ahead: within
# 5 %); relabel_dense of those IDs into a 1M-node slot 0.82 ms, 0.60 ms 16 ahead (32 and 64: the same).
EDGES_AHEAD, HALO_AHEAD, SLOTS_AHEAD = 24, 8, 16


@kernel(nogil=True)
def neighbour_ids(pos, indices, node_gid, edge_gid, inner, start):
    """``(node_gid[indices[pos]], edge_gid[pos])`` as int64, in one pass over the sampled positions (no
    intermediate arrays; the arrays may be stored narrower). Local nodes below ``inner`` have global IDs
    ``start + local`` (a partition's inner nodes come first, numbered in order): their IDs are computed, not
    read, which saves a random read of ``node_gid`` for most sampled edges (``inner = 0``: read every one).
    Serial, asking for each edge's lines :data:`EDGES_AHEAD` positions ahead and for a HALO node's
    :data:`HALO_AHEAD` ahead: a rank's sampling runs on one thread (a parallel loop cost about 1.5 x there)."""
    n = pos.shape[0]
    nbrs = np.empty(n, dtype=np.int64)
    edges = np.empty(n, dtype=np.int64)
    for i in range(n):
        if i + EDGES_AHEAD < n:
            f = pos[i + EDGES_AHEAD]
            prefetch(indices, f)
            prefetch(edge_gid, f)
        if i + HALO_AHEAD < n:
            w = np.int64(indices[pos[i + HALO_AHEAD]])  # its line was asked for EDGES_AHEAD - HALO_AHEAD ago
            if w >= inner:
                prefetch(node_gid, w)
        e = pos[i]
        v = np.int64(indices[e])
        nbrs[i] = start + v if v < inner else node_gid[v]
        edges[i] = edge_gid[e]
    return nbrs, edges


@kernel(nogil=True)
def place_runs(starts, counts, nbrs, edges, out_nbrs, out_edges):
    """Copy node ``i``'s run of ``counts[i]`` entries of ``nbrs`` and ``edges`` (listed node by node) to
    ``out_*[starts[i]:starts[i] + counts[i]]``: one answer's part of a layer put in request order."""
    j = 0
    for i in range(starts.shape[0]):
        at = starts[i]
        for t in range(counts[i]):
            out_nbrs[at + t] = nbrs[j]
            out_edges[at + t] = edges[j]
            j += 1


@kernel(parallel=True, nogil=True)
def typed_ranges(indptr, etypes, nodes, types):
    """Edge ranges of type ``types[i]`` among the in-edges of ``nodes[i]``, where each node's in-edges are
    sorted by edge type (``etypes``, aligned with ``indices``). Returns ``(starts, ends)``."""
    starts = np.empty(nodes.shape[0], dtype=np.int64)
    ends = np.empty(nodes.shape[0], dtype=np.int64)
    for i in numba.prange(nodes.shape[0]):
        lo, hi, r = indptr[nodes[i]], indptr[nodes[i] + 1], types[i]
        a, b = lo, hi
        while a < b:  # first edge of type >= r
            mid = (a + b) // 2
            if etypes[mid] < r:
                a = mid + 1
            else:
                b = mid
        starts[i] = a
        b = hi
        while a < b:  # first edge of type > r
            mid = (a + b) // 2
            if etypes[mid] <= r:
                a = mid + 1
            else:
                b = mid
        ends[i] = a
    return starts, ends


@kernel(nogil=True)
def relabel_dense(ids: np.ndarray, slot: np.ndarray, base: int) -> tuple[np.ndarray, np.ndarray]:
    """Output positions of ``ids`` using ``slot`` (node ID → position, -1 = unseen): unseen IDs get
    ``base, base + 1, ...`` in first-appearance order. Returns ``(positions, first index of each new ID)``.
    The caller resets ``slot`` for the nodes it added."""
    local = np.empty(ids.shape[0], dtype=np.int64)
    first = np.empty(ids.shape[0], dtype=np.int64)
    count, n = 0, ids.shape[0]
    for i in range(n):
        if i + SLOTS_AHEAD < n:
            prefetch(slot, ids[i + SLOTS_AHEAD])  # type: ignore[call-arg]  # mypy sees the intrinsic's typer
        v = ids[i]
        if slot[v] < 0:
            slot[v] = base + count
            first[count] = i
            count += 1
        local[i] = slot[v]
    return local, first[:count]


@kernel(inline="always")
def _home(v: np.int64, mask: int) -> int:
    """Where node ID ``v``'s probe starts in a table of ``mask + 1`` entries."""
    return int((np.uint64(v) * np.uint64(GOLDEN)) >> np.uint64(32)) & mask


@kernel()
def relabel_hashed(ids, keys, vals, base):
    """As :func:`relabel_dense`, with an open-addressing table (``keys``: node IDs, -1 = empty, a power of two
    long and at most half full; ``vals``: their positions) instead of a slot over every node: memory follows
    the batch, not the graph. The caller sizes the table (:class:`graphshard.sampling.neighbor.HashSlot`)."""
    mask = keys.shape[0] - 1
    local = np.empty(ids.shape[0], dtype=np.int64)
    first = np.empty(ids.shape[0], dtype=np.int64)
    count, n = 0, ids.shape[0]
    for i in range(n):
        if i + SLOTS_AHEAD < n:
            ahead = _home(ids[i + SLOTS_AHEAD], mask)
            prefetch(keys, ahead)
            prefetch(vals, ahead)
        v = ids[i]
        h = _home(v, mask)
        while keys[h] != v and keys[h] >= 0:
            h = (h + 1) & mask
        if keys[h] < 0:
            keys[h] = v
            vals[h] = base + count
            first[count] = i
            count += 1
        local[i] = vals[h]
    return local, first[:count]


def warm_up() -> None:
    """Compile the sampling kernels (and DistGraph's degree kernels, and the partition book's owner look-up) for
    the argument types training passes (or load them from the cache), so ranks started afterwards load them from
    the cache instead of each compiling them at once: for compact partitions (int32 source IDs, int8 edge types:
    what the format stores below 2^31 local nodes and 128 edge types). Partitions of other types (written before
    compact storage) compile their variants in each rank the first time, once per machine (numba caches them on
    disk)."""
    indptr, nodes, fanouts = np.array([0, 1, 2], np.int64), np.array([0, 1], np.int64), np.ones(2, np.int64)
    starts, ends = indptr[nodes], indptr[nodes + 1]
    relabel_dense(np.array([1, 0], np.int64), np.full(2, -1, np.int64), 0)
    relabel_hashed(np.array([1, 0], np.int64), np.full(4, -1, np.int64), np.zeros(4, np.int64), 0)
    for index_type, type_type in ((np.int32, np.int8),):
        indices, etype = np.array([1, 0], index_type), np.zeros(2, type_type)
        sample_ranges(starts, ends, indices, fanouts, replace=False, key=1)
        sample_ranges(
            starts, ends, indices, fanouts, replace=False, key=1, node_time=np.zeros(2), slot_time=np.zeros(2)
        )  # temporal: float64 times
        typed_ranges(indptr, etype, nodes, np.zeros(2, np.int64))
        for edge_type in (np.int32, np.int64):
            neighbour_ids(nodes, indices, nodes, nodes.astype(edge_type), 1, 0)
        in_degree_table(indptr, etype, 2, 2)
        source_counts(indptr, indices, etype, 2, num_nodes=2, num_etypes=1)
    place_runs(nodes, fanouts, nodes, nodes, np.empty(2, np.int64), np.empty(2, np.int64))
    warm_ranges()

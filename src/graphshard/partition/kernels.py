"""Compiled (numba) kernels of the partition pipeline: stable counting sorts, in-edge grouping, gathers.

The counting sorts run in parallel: every thread histograms a contiguous chunk, a prefix sum over
(key, chunk) gives each chunk its write positions, and each chunk scatters its items in order, so
the result is stable (identical to a sequential counting sort).
"""

from __future__ import annotations

import numba
import numpy as np

from ..jit import kernel


@kernel(nogil=True)
def chunk_bounds(n: int, num_chunks: int) -> np.ndarray:
    """Boundaries of ``num_chunks`` contiguous, near-equal chunks of ``range(n)`` (num_chunks + 1)."""
    bounds = np.empty(num_chunks + 1, dtype=np.int64)
    for c in range(num_chunks + 1):
        bounds[c] = n * c // num_chunks
    return bounds


@kernel(nogil=True)
def chunk_positions(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """From per-chunk key counts (chunks, keys): per-chunk start positions and key offsets (keys + 1)."""
    num_chunks, num_keys = counts.shape
    pos = np.empty_like(counts)
    offsets = np.zeros(num_keys + 1, dtype=np.int64)
    running = 0
    for k in range(num_keys):
        offsets[k] = running
        for c in range(num_chunks):
            pos[c, k] = running
            running += counts[c, k]
    offsets[num_keys] = running
    return pos, offsets


def stable_order_gathered(index: np.ndarray, table: np.ndarray, num_keys: int, order: np.ndarray) -> np.ndarray:
    """Stable order of the positions ``i`` by key ``table[index[i]]`` in ``[0, num_keys)``, written into
    ``order`` (preallocated; int32 suffices below 2**31 items). Returns the key offsets (keys + 1)."""
    return _stable_order_gathered(index, table, num_keys, order, numba.get_num_threads())


@kernel(parallel=True)
def _stable_order_gathered(index, table, num_keys, order, num_chunks):
    bounds = chunk_bounds(index.shape[0], num_chunks)
    counts = np.zeros((num_chunks, num_keys), dtype=np.int64)
    for c in numba.prange(num_chunks):
        for i in range(bounds[c], bounds[c + 1]):
            counts[c, table[index[i]]] += 1
    pos, offsets = chunk_positions(counts)
    for c in numba.prange(num_chunks):
        for i in range(bounds[c], bounds[c + 1]):
            k = table[index[i]]
            order[pos[c, k]] = i
            pos[c, k] += 1
    return offsets


def stable_order(keys: np.ndarray, num_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """``(order, offsets)``: positions sorted stably by ``keys`` in ``[0, num_keys)``; key ``k`` occupies
    ``order[offsets[k]:offsets[k+1]]``."""
    order = np.empty(keys.shape[0], dtype=np.int64)
    offsets = stable_order_gathered(np.arange(keys.shape[0]), keys, num_keys, order)
    return order, offsets


def range_in_edges(perm, src, dst, old2new, *, node_lo, node_hi, edge_lo, edge_hi, out_dtype=np.int64):
    """In-edges of the nodes with new IDs ``[node_lo, node_hi)``, which are exactly the new edges
    ``[edge_lo, edge_hi)`` (an edge belongs to its destination's partition), grouped by destination.

    Returns ``(indptr, new_eids, new_src)``: for local destination ``v = new ID - node_lo``, entries
    ``indptr[v]:indptr[v+1]`` in increasing new edge ID. ``perm`` maps new → original edge IDs;
    ``src``/``dst`` hold original node IDs; ``old2new`` renumbers nodes. Both passes read the edges
    in order (``perm`` ascends inside a partition) and recompute what they need, so no work array
    of edge size is kept besides the two outputs; only the final scatter is random.

    ``perm=None`` means the edges are ``src``/``dst`` themselves, in order; then ``new_eids`` are
    positions (``new edge ID - edge_lo``). ``out_dtype`` (e.g. int32) sets the outputs' type.
    """
    identity = perm is None
    if identity:
        perm = np.zeros(1, dtype=np.int64)
    new_eids = np.empty(edge_hi - edge_lo, dtype=out_dtype)
    new_src = np.empty(edge_hi - edge_lo, dtype=out_dtype)
    indptr = _range_in_edges(
        perm,
        src,
        dst,
        old2new,
        node_lo,
        node_hi,
        edge_lo,
        edge_hi,
        numba.get_num_threads(),
        identity,
        new_eids,
        new_src,
    )
    return indptr, new_eids, new_src


@kernel(parallel=True)
def _range_in_edges(
    perm, src, dst, old2new, node_lo, node_hi, edge_lo, edge_hi, num_chunks, identity, new_eids, new_src
):
    n = node_hi - node_lo
    m = edge_hi - edge_lo
    bounds = chunk_bounds(m, num_chunks)
    counts = np.zeros((num_chunks, n), dtype=np.int64)
    for c in numba.prange(num_chunks):
        for j in range(bounds[c], bounds[c + 1]):
            e = j if identity else perm[edge_lo + j]
            counts[c, old2new[dst[e]] - node_lo] += 1
    pos, indptr = chunk_positions(counts)
    for c in numba.prange(num_chunks):
        for j in range(bounds[c], bounds[c + 1]):
            e = j if identity else perm[edge_lo + j]
            v = old2new[dst[e]] - node_lo
            k = pos[c, v]
            new_eids[k] = j if identity else edge_lo + j
            new_src[k] = old2new[src[e]]
            pos[c, v] = k + 1
    return indptr


def ragged_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + l)`` for every ``(s, l)`` pair, vectorised."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    shift = np.asarray(starts, dtype=np.int64) - (np.cumsum(lengths) - lengths)
    return np.repeat(shift, lengths) + np.arange(total, dtype=np.int64)


@kernel(nogil=True)
def gather_ranges(indptr: np.ndarray, nodes: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Concatenate ``values[indptr[v]:indptr[v+1]]`` for each ``v`` in ``nodes``, in order."""
    total = 0
    for i in range(nodes.shape[0]):
        total += indptr[nodes[i] + 1] - indptr[nodes[i]]
    out = np.empty(total, dtype=values.dtype)
    k = 0
    for i in range(nodes.shape[0]):
        for j in range(indptr[nodes[i]], indptr[nodes[i] + 1]):
            out[k] = values[j]
            k += 1
    return out


@kernel(parallel=True)
def relabel_in_place(ids: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Replace every ``ids[i]`` by ``table[ids[i]]`` without a temporary array; returns ``ids``."""
    for i in numba.prange(ids.shape[0]):
        ids[i] = table[ids[i]]
    return ids


@kernel(parallel=True)
def take_int64(table: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``table[idx]`` as int64, in parallel (the table may be int32)."""
    out = np.empty(idx.shape[0], dtype=np.int64)
    for i in numba.prange(idx.shape[0]):
        out[i] = table[idx[i]]
    return out


@kernel(parallel=True)
def _take_rows(table: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:
    for i in numba.prange(rows.shape[0]):
        out[i] = table[rows[i]]


def take_rows(table: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``table[rows]`` for a feature array of any shape, gathering rows in parallel."""
    flat = table.reshape(table.shape[0], -1) if table.ndim != 2 else table
    if flat.dtype == np.bool_ or not flat.flags.c_contiguous:
        return np.ascontiguousarray(table[rows])
    out = np.empty((rows.shape[0], flat.shape[1]), dtype=flat.dtype)
    _take_rows(flat, rows, out)
    return out.reshape((rows.shape[0],) + table.shape[1:])

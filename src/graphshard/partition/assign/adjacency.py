"""The undirected, de-duplicated, self-loop-free adjacency (CSR) that graph partitioners take."""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from ...jit import kernel
from ..kernels import chunk_bounds, chunk_positions


@dataclass(frozen=True)
class UndirectedCSR:
    """``adjncy[xadj[v]:xadj[v+1]]`` are the distinct neighbours of ``v`` (ascending, never ``v`` itself);
    every edge is stored in both directions. Arrays are int64 (METIS's ``idx_t`` here)."""

    xadj: np.ndarray
    adjncy: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.xadj.shape[0] - 1)


def undirected_csr(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> UndirectedCSR:
    """Symmetrise ``(src, dst)``, drop self-loops and duplicates.

    Works in a buffer of ``2 E`` int32 entries (int64 from 2**31 nodes on), then returns int64 arrays.
    Every pass runs in parallel over chunks of edges or ranges of rows.
    """
    threads = numba.get_num_threads()
    counts = _chunk_degrees(src, dst, num_nodes, threads)
    pos, xadj = chunk_positions(counts)
    del counts
    adjncy = np.empty(int(xadj[-1]), dtype=np.int32 if num_nodes < 2**31 else np.int64)
    _fill(src, dst, pos, adjncy, threads)
    del pos
    degrees = _sort_dedup_rows(xadj, adjncy)
    new_xadj = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(degrees, out=new_xadj[1:])
    out = np.empty(int(new_xadj[-1]), dtype=np.int64)
    _copy_rows(xadj, new_xadj, adjncy, out)
    return UndirectedCSR(new_xadj, out)


@kernel(parallel=True)
def _chunk_degrees(src, dst, n, chunks):
    """Per chunk of edges, how many adjacency entries each node receives (both directions)."""
    b = chunk_bounds(src.shape[0], chunks)
    counts = np.zeros((chunks, n), dtype=np.int64)
    for c in numba.prange(chunks):
        for i in range(b[c], b[c + 1]):
            if src[i] != dst[i]:
                counts[c, src[i]] += 1
                counts[c, dst[i]] += 1
    return counts


@kernel(parallel=True)
def _fill(src, dst, pos, adjncy, chunks):
    b = chunk_bounds(src.shape[0], chunks)
    for c in numba.prange(chunks):
        for i in range(b[c], b[c + 1]):
            u, v = src[i], dst[i]
            if u != v:
                adjncy[pos[c, u]] = v
                pos[c, u] += 1
                adjncy[pos[c, v]] = u
                pos[c, v] += 1


@kernel(parallel=True)
def _sort_dedup_rows(xadj, adjncy):
    n = xadj.shape[0] - 1
    degrees = np.zeros(n, dtype=np.int64)
    for v in numba.prange(n):
        lo, hi = xadj[v], xadj[v + 1]
        if hi == lo:
            continue
        row = np.sort(adjncy[lo:hi])
        k = 0
        for j in range(row.shape[0]):
            if j == 0 or row[j] != row[j - 1]:
                adjncy[lo + k] = row[j]
                k += 1
        degrees[v] = k
    return degrees


@kernel(parallel=True)
def _copy_rows(old_xadj, new_xadj, adjncy, out):
    for v in numba.prange(old_xadj.shape[0] - 1):
        lo, dst = old_xadj[v], new_xadj[v]
        for j in range(new_xadj[v + 1] - dst):
            out[dst + j] = adjncy[lo + j]

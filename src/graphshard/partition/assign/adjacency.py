"""The undirected, de-duplicated, self-loop-free adjacency (CSR) that graph partitioners take."""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np


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
    """Symmetrise ``(src, dst)``, drop self-loops and duplicates; O(E) memory beyond the output."""
    xadj, adjncy = _fill(src, dst, num_nodes)
    degrees = _sort_dedup_rows(xadj, adjncy)
    new_xadj = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(degrees, out=new_xadj[1:])
    _compact(xadj, new_xadj, adjncy)
    return UndirectedCSR(new_xadj, adjncy[: new_xadj[-1]].copy())


@numba.njit(cache=True, nogil=True)
def _fill(src, dst, n):
    xadj = np.zeros(n + 1, dtype=np.int64)
    for i in range(src.shape[0]):
        if src[i] != dst[i]:
            xadj[src[i] + 1] += 1
            xadj[dst[i] + 1] += 1
    for v in range(n):
        xadj[v + 1] += xadj[v]
    pos = xadj[:-1].copy()
    adjncy = np.empty(xadj[n], dtype=np.int64)
    for i in range(src.shape[0]):
        u, v = src[i], dst[i]
        if u != v:
            adjncy[pos[u]] = v
            pos[u] += 1
            adjncy[pos[v]] = u
            pos[v] += 1
    return xadj, adjncy


@numba.njit(cache=True, parallel=True)
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


@numba.njit(cache=True, nogil=True)
def _compact(old_xadj, new_xadj, adjncy):
    for v in range(old_xadj.shape[0] - 1):
        lo, dst = old_xadj[v], new_xadj[v]
        for j in range(new_xadj[v + 1] - dst):
            adjncy[dst + j] = adjncy[lo + j]

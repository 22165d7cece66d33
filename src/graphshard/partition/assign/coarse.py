"""One level of coarsening for the streaming partitioner: contract label-propagation clusters into a weighted
graph, partition that graph by restreamed Fennel with node and edge weights, and project the parts back.

On graphs whose order carries locality the clusters are few and dense (cnr-2000: 325 k nodes become
about 20 k clusters joined by 80 k weighted entries), so the contracted graph is small and a placement
that sees the clusters' connections cuts far less than dealing them out in stream order (cnr-2000,
k = 4: 0.22 % against 0.86 %). The contracted graph is built from the adjacency blocks in turn, each
block's pairs de-duplicated and merged; it is abandoned (the caller falls back to dealing) when its
entries would exceed ``max_entries``. Clusters are placed largest first, as multilevel partitioners
place heavy coarse nodes before light ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np

from ...jit import kernel

Blocks = Callable[[], Iterator[tuple[int, np.ndarray, np.ndarray]]]
COARSE_PASSES = 10
GAMMA = 1.5


def contract(
    blocks: Blocks, cid: np.ndarray, num_clusters: int, max_entries: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The contracted graph as a weighted CSR ``(xadj, adjncy, weights)`` over clusters ``cid`` (dense
    0..C-1 per node): one entry per ordered pair of distinct clusters joined by an edge, weighted by how
    many edges join them. None when it would hold more than ``max_entries`` entries."""
    C = np.int64(num_clusters)
    keys, counts = np.zeros(0, np.int64), np.zeros(0, np.int64)
    for lo, r0, r1, xadj, adj in _slices(blocks):
        rows = np.repeat(np.arange(lo + r0, lo + r1, dtype=np.int64), np.diff(xadj[r0 : r1 + 1]))
        cu, cv = cid[rows], cid[adj[xadj[r0] : xadj[r1]]]
        keep = cu != cv
        k, c = np.unique(cu[keep].astype(np.int64) * C + cv[keep], return_counts=True)
        keys, inverse = np.unique(np.concatenate([keys, k]), return_inverse=True)
        counts = np.bincount(inverse, weights=np.concatenate([counts, c]), minlength=keys.shape[0]).astype(np.int64)
        if keys.shape[0] > max_entries:
            return None
    xadj = np.zeros(num_clusters + 1, np.int64)
    np.cumsum(np.bincount(keys // C, minlength=num_clusters), out=xadj[1:])
    return xadj, keys % C, counts


SLICE = 1 << 22  # entries contracted at once: their temporaries stay near 100 MB


def _slices(blocks: Blocks) -> Iterator[tuple[int, int, int, np.ndarray, np.ndarray]]:
    """``(lo, r0, r1, xadj, adjncy)``: rows ``[r0, r1)`` of each block, about :data:`SLICE` entries at a time."""
    for lo, xadj, adj in blocks():
        rows = xadj.shape[0] - 1
        r0 = 0
        while r0 < rows:
            r1 = int(np.searchsorted(xadj, xadj[r0] + SLICE, side="right")) - 1
            r1 = min(rows, max(r1, r0 + 1))
            yield lo, r0, r1, xadj, adj
            r0 = r1


def coarse_parts(
    xadj: np.ndarray,
    adjncy: np.ndarray,
    weights: np.ndarray,
    sizes: np.ndarray,
    *,
    k: int,
    cap: int,
    num_nodes: int,
    passes: int = COARSE_PASSES,
) -> np.ndarray:
    """Restreamed Fennel over the contracted graph: the part (int32) of every cluster, clusters of ``sizes``
    nodes placed largest first, each part holding at most ``cap`` nodes when a part can take it."""
    parts = np.full(sizes.shape[0], -1, dtype=np.int32)
    load = np.zeros(k, dtype=np.int64)
    alpha = math.sqrt(k) * (weights.sum() / 2) / max(1.0, num_nodes) ** GAMMA
    order = np.argsort(-sizes, kind="stable")
    for _ in range(passes):
        _place_weighted(
            xadj,
            adjncy,
            weights.astype(np.float64),
            sizes.astype(np.int64),
            parts,
            load,
            cap,
            alpha * GAMMA,
            np.zeros(k, dtype=np.float64),
            order,
        )
    return parts


@kernel(nogil=True)
def _place_weighted(xadj, adjncy, weights, sizes, parts, load, cap, alpha_g, scratch, order):  # pragma: no cover
    k = load.shape[0]
    for v in order:
        old = parts[v]
        if old >= 0:
            load[old] -= sizes[v]
        for i in range(k):
            scratch[i] = 0.0
        for j in range(xadj[v], xadj[v + 1]):
            p = parts[adjncy[j]]
            if p >= 0:
                scratch[p] += weights[j]
        best, best_score = -1, -np.inf
        for i in range(k):
            if load[i] + sizes[v] > cap:
                continue
            score = scratch[i] - alpha_g * sizes[v] * math.sqrt(load[i])
            if score > best_score or (score == best_score and load[i] < load[best]):
                best, best_score = i, score
        if best < 0:  # no part has room for the whole cluster: the least loaded takes it
            best = 0
            for i in range(1, k):
                if load[i] < load[best]:
                    best = i
        parts[v] = best
        load[best] += sizes[v]

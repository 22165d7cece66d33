"""Streaming partitioning: restreamed Fennel over each node's adjacency, in node order, with hard balance.

Fennel (Tsourakakis et al., WSDM 2014) places each node, as it streams past, in the part that holds most
of its already-placed neighbours, less a load penalty ``alpha * gamma * |P|^(gamma - 1)`` (gamma = 1.5,
``alpha = sqrt(k) * m / n^1.5``, m undirected edges). One pass sees only the neighbours placed before a
node; restreaming (Nishimura & Ugander, KDD 2013) runs further passes in which every node is taken out
of its part and placed again, now seeing where all its neighbours are: cuts fall pass after pass towards
those of multilevel partitioners on graphs with locality (web crawls, meshes), while memory stays
O(nodes) — the part of every node, its balance class and weight — and each pass reads the adjacency
once, in order. Balance is a hard cap, never exceeded: at most ``ceil((1 + imbalance) * n / k)`` nodes
per part, and likewise per balance class (``balance_ntypes``) and for the summed node weights
(``balance_edges``: in-degree). Deterministic: one thread, fixed order, ties to the smaller part.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np

from ...jit import kernel

Blocks = Callable[[], Iterator[tuple[int, np.ndarray, np.ndarray]]]  # -> (first node, xadj from 0, adjncy)
DEFAULT_PASSES = 8
GAMMA = 1.5


def stream_partition(blocks: Blocks, num_nodes: int, num_entries: int, num_parts: int,
                     classes: np.ndarray | None = None, weights: np.ndarray | None = None,
                     passes: int = DEFAULT_PASSES, imbalance: float = 0.03) -> np.ndarray:
    """The part (int32) of every node. ``blocks()`` yields the adjacency in node order (called once per
    pass); ``num_entries``: its total length (2 × undirected edges); ``classes``: balance class per node
    (dense 0..C-1); ``weights``: a second balanced quantity per node (e.g. in-degree)."""
    k = int(num_parts)
    parts = np.full(num_nodes, -1, dtype=np.int32)
    if k == 1 or num_nodes == 0:
        return np.zeros(num_nodes, dtype=np.int32)
    cls = np.zeros(num_nodes, dtype=np.int32) if classes is None else np.ascontiguousarray(classes, dtype=np.int32)
    counts = np.bincount(cls, minlength=1).astype(np.int64)
    cls_caps = np.ceil((1 + imbalance) * counts / k).astype(np.int64)
    w = np.zeros(0, dtype=np.int64) if weights is None else np.ascontiguousarray(weights, dtype=np.int64)
    wcap = (int(math.ceil((1 + imbalance) * w.sum() / k)) + int(w.max())) if w.size else 0
    state = (np.zeros(k, dtype=np.int64), np.zeros((counts.shape[0], k), dtype=np.int64), np.zeros(k, dtype=np.int64))
    alpha = math.sqrt(k) * (num_entries / 2) / max(1.0, num_nodes) ** GAMMA
    cap = int(math.ceil((1 + imbalance) * num_nodes / k))
    scratch = np.zeros(k, dtype=np.float64)
    for _ in range(max(1, passes)):
        for lo, xadj, adj in blocks():
            _place(lo, xadj, adj, parts, cls, w, *state, cap, cls_caps, wcap, alpha * GAMMA, scratch)
    return parts


@kernel(nogil=True)
def _place(lo, xadj, adj, parts, cls, w, sizes, cls_sizes, wsizes, cap, cls_caps, wcap, alpha_g, scratch):
    k = sizes.shape[0]
    weighted = w.shape[0] > 0
    for r in range(xadj.shape[0] - 1):
        v = lo + r
        c = cls[v]
        wv = w[v] if weighted else 0
        old = parts[v]
        if old >= 0:  # a later pass: take the node out, then place it again
            sizes[old] -= 1
            cls_sizes[c, old] -= 1
            wsizes[old] -= wv
        for i in range(k):
            scratch[i] = 0.0
        for j in range(xadj[r], xadj[r + 1]):
            p = parts[adj[j]]
            if p >= 0:
                scratch[p] += 1.0
        best, best_score = -1, -np.inf
        for i in range(k):
            if sizes[i] >= cap or cls_sizes[c, i] >= cls_caps[c] or (weighted and wsizes[i] + wv > wcap):
                continue
            score = scratch[i] - alpha_g * math.sqrt(sizes[i])
            if score > best_score or (score == best_score and sizes[i] < sizes[best]):
                best, best_score = i, score
        if best < 0:  # every part is at a cap (only with several caps at once): the least loaded
            best = 0
            for i in range(1, k):
                if cls_sizes[c, i] < cls_sizes[c, best] or (cls_sizes[c, i] == cls_sizes[c, best] and sizes[i] < sizes[best]):
                    best = i
        parts[v] = best
        sizes[best] += 1
        cls_sizes[c, best] += 1
        wsizes[best] += wv


def in_memory_blocks(xadj: np.ndarray, adjncy: np.ndarray) -> Blocks:
    """:data:`Blocks` over an in-memory CSR (one block)."""
    return lambda: iter([(0, xadj, adjncy)])

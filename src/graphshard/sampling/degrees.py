"""Degree tables of one partition's inner nodes, per edge type: in-degrees counted from the partition's own
in-edges, out-degrees gathered from every partition holding edges out of these nodes.

Both counts are compiled loops over the stored edges that allocate nothing per edge: a partition of
``E`` edges adds ``O(local nodes × edge types)`` memory, and the out-degree exchange sends one
``(node, edge type, count)`` triple per distinct source instead of one item per edge.
"""

from __future__ import annotations

import threading

import numpy as np

from ..jit import kernel


@kernel(nogil=True)
def _in_counts(indptr, etype, count, num_etypes):  # pragma: no cover - compiled
    out = np.zeros((count, num_etypes), dtype=np.int64)
    for v in range(count):
        for e in range(indptr[v], indptr[v + 1]):
            out[v, etype[e]] += 1
    return out


@kernel(nogil=True)
def _source_counts(indices, etype, num_edges, num_nodes, num_etypes):  # pragma: no cover - compiled
    out = np.zeros((num_nodes, num_etypes), dtype=np.int64)
    for e in range(num_edges):
        out[indices[e], etype[e]] += 1
    return out


def in_degree_table(indptr: np.ndarray, etype: np.ndarray, count: int, num_etypes: int) -> np.ndarray:
    """``(count, num_etypes)`` in-degrees of local nodes ``[0, count)`` (the inner nodes) of a CSC."""
    if num_etypes == 1:
        return np.diff(indptr[: count + 1]).astype(np.int64).reshape(count, 1)
    return _in_counts(indptr, etype, count, num_etypes)


def source_counts(
    indptr: np.ndarray, indices: np.ndarray, etype: np.ndarray, count: int, *, num_nodes: int, num_etypes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Out-edges counted per local source node and edge type over the in-edges of the inner nodes (the
    partition's own edges, stored first): ``(local node, edge type, count)`` of every non-zero pair."""
    table = _source_counts(indices, etype, int(indptr[count]), num_nodes, num_etypes)
    rows, cols = np.nonzero(table)
    return rows, cols, table[rows, cols]


class DegreeTable:
    """In/out-degree per (inner node, edge type) of the partition(s) one process serves, from the
    ``(count, num_etypes)`` in-degree table of its inner nodes (first global ID ``start``); out-degree
    counts arrive from every partition holding edges out of these nodes (:meth:`add_out`, thread-safe)."""

    def __init__(self, in_table: np.ndarray, start: int):
        self.start, self.num_etypes, self.lock = start, in_table.shape[1], threading.Lock()
        self.table = {"in": in_table, "out": np.zeros_like(in_table)}

    def add_out(self, gids: np.ndarray, etype: np.ndarray, counts: np.ndarray) -> None:
        add = np.bincount(
            (gids - self.start) * self.num_etypes + etype, weights=counts, minlength=self.table["out"].size
        ).astype(np.int64)
        with self.lock:
            self.table["out"] += add.reshape(self.table["out"].shape)

    def get(self, kind: str, gids: np.ndarray, etype: int | None) -> np.ndarray:
        rows = self.table[kind][gids - self.start]
        return rows.sum(axis=1) if etype is None else rows[:, etype]

"""How layer-wise inference cuts a rank's destinations into chunks: consecutive runs that cover them once, each
within the edge budget (unless one node alone exceeds it) and the node cap (a partition of many isolated
nodes must not be one chunk of every node: the layer's temporaries are rows of the chunk's destinations)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from graphshard.infer.plan import chunks


def _plan(degrees: np.ndarray, lo: int, hi: int) -> SimpleNamespace:
    return SimpleNamespace(indptr=np.concatenate([[0], np.cumsum(degrees)]), dst_lo=lo, dst_hi=hi)


def test_chunks_cover_the_destinations_within_both_budgets():
    rng = np.random.default_rng(0)
    degrees = np.where(rng.random(5000) < 0.8, 0, rng.integers(1, 60, 5000))  # mostly isolated, some hubs
    degrees[1234] = 500  # one node beyond the edge budget: a chunk of its own
    p = _plan(degrees, 100, 4900)
    runs = list(chunks(p, edges=200, nodes=300))
    assert runs[0][0] == 100 and runs[-1][1] == 4900
    assert all(a < b for a, b in runs) and all(b == c for (_, b), (c, _) in zip(runs, runs[1:]))
    for a, b in runs:
        assert b - a <= 300
        assert p.indptr[b] - p.indptr[a] <= 200 or b - a == 1
    assert (1234, 1235) in runs
    assert len(list(chunks(_plan(np.zeros(1000, np.int64), 0, 1000), edges=200, nodes=300))) == 4  # no edges

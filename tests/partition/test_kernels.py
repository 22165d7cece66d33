"""Compiled kernels against plain NumPy references."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from graphshard.partition.kernels import gather_ranges, range_in_edges, stable_order, take_rows


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 6), max_size=300))
def test_stable_order_equals_stable_argsort(keys):
    keys = np.array(keys, dtype=np.int64)
    order, offsets = stable_order(keys, 7)
    assert np.array_equal(order, np.argsort(keys, kind="stable"))
    assert np.array_equal(np.diff(offsets), np.bincount(keys, minlength=7))


def test_range_in_edges_reference():
    rng = np.random.default_rng(0)
    n, m = 50, 400
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    old2new = rng.permutation(n)
    # partition = new ID range [10, 30); its edges are those with new dst in the range, in original order
    mine = np.flatnonzero((old2new[dst] >= 10) & (old2new[dst] < 30))
    perm = np.concatenate([mine, np.setdiff1d(np.arange(m), mine)])
    indptr, eids, new_src = range_in_edges(
        perm, src, dst, old2new, node_lo=10, node_hi=30, edge_lo=0, edge_hi=len(mine)
    )
    for v in range(20):
        got = eids[indptr[v] : indptr[v + 1]]
        want = [j for j in range(len(mine)) if old2new[dst[perm[j]]] == 10 + v]
        assert got.tolist() == want
    assert np.array_equal(new_src, old2new[src[perm[eids]]])


def test_gather_ranges_and_take_rows():
    indptr = np.array([0, 2, 2, 5])
    values = np.arange(5) * 10
    assert gather_ranges(indptr, np.array([2, 0, 1]), values).tolist() == [20, 30, 40, 0, 10]
    table = np.arange(24, dtype=np.float32).reshape(6, 2, 2)
    rows = np.array([5, 0, 3])
    assert np.array_equal(take_rows(table, rows), table[rows])
    flags = np.array([True, False, True])
    assert np.array_equal(take_rows(flags, np.array([2, 1])), flags[[2, 1]])

"""The undirected CSR handed to partitioners, against a set-based reference."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from graphshard.partition.assign.adjacency import undirected_csr

edges = st.integers(1, 40).flatmap(
    lambda n: st.tuples(st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=120))
)


@settings(max_examples=80, deadline=None)
@given(edges)
def test_matches_set_reference(case):
    n, pairs = case
    src = np.array([p[0] for p in pairs], dtype=np.int64)
    dst = np.array([p[1] for p in pairs], dtype=np.int64)
    csr = undirected_csr(src, dst, n)
    expected = {v: set() for v in range(n)}
    for u, v in pairs:
        if u != v:
            expected[u].add(v)
            expected[v].add(u)
    assert csr.xadj.dtype == np.int64 and csr.adjncy.dtype == np.int64
    for v in range(n):
        row = csr.adjncy[csr.xadj[v] : csr.xadj[v + 1]].tolist()
        assert row == sorted(expected[v])

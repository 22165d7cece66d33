"""Assignment algorithms: balance guarantees, weights, the ParHIP file KaMinPar reads."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphshard.partition.assign import metis_weights
from graphshard.partition.assign.adjacency import undirected_csr
from graphshard.partition.assign.kaminpar import kaminpar_partition, write_parhip
from graphshard.partition.assign.metis import metis_kway
from graphshard.partition.assign.random import random_assignment


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200), st.integers(1, 9), st.integers(0, 3), st.integers(0, 10))
def test_random_is_exactly_balanced_per_class(n, parts, num_classes, seed):
    parts = min(parts, n)
    classes = np.random.default_rng(seed).integers(0, num_classes + 1, n)
    a = random_assignment(n, parts, seed, classes)
    sizes = np.bincount(a, minlength=parts)
    assert sizes.max() - sizes.min() <= 1
    for c in np.unique(classes):
        per = np.bincount(a[classes == c], minlength=parts)
        assert per.max() - per.min() <= 1


def test_random_is_not_correlated_with_generator_ids(tmp_path):
    """R-MAT scrambles IDs with its own stream: random assignment must still balance edges."""
    from graphshard.datasets import rmat_graph

    g = rmat_graph(12, 8, seed=0).graph
    src, dst = g.edges[("_N", "_E", "_N")]
    a = random_assignment(g.num_nodes["_N"], 4, 0)
    owned = np.bincount(a[dst], minlength=4)
    assert owned.max() <= 1.15 * owned.mean()


def test_metis_weights_columns():
    classes = np.array([0, 1, 1, 5])
    deg = np.array([3, 0, 2, 1])
    assert metis_weights(None, None) is None
    assert metis_weights(None, deg).tolist() == [[3], [0], [2], [1]]
    w = metis_weights(classes, deg)
    assert w.tolist() == [[1, 0, 0, 3, 0, 0], [0, 1, 0, 0, 0, 0], [0, 1, 0, 0, 2, 0], [0, 0, 1, 0, 0, 1]]


def test_metis_multi_constraint_balances_every_class():
    rng = np.random.default_rng(0)
    n = 3000
    src, dst = rng.integers(0, n, 20000), rng.integers(0, n, 20000)
    csr = undirected_csr(src, dst, n)
    classes = (np.arange(n) < 300).astype(np.int64)  # a rare class of 10 %
    parts = metis_kway(csr, 4, metis_weights(classes, None), seed=1)
    rare = np.bincount(parts[classes == 1], minlength=4)
    assert rare.max() <= 1.1 * rare.mean() and rare.min() > 0
    assert np.array_equal(parts, metis_kway(csr, 4, metis_weights(classes, None), seed=1))


def test_parhip_file_read_by_kaminpar(tmp_path):
    kaminpar = pytest.importorskip("kaminpar")
    src = np.array([0, 1, 2, 3, 0])
    dst = np.array([1, 2, 3, 0, 2])
    csr = undirected_csr(src, dst, 5)  # node 4 isolated
    write_parhip(str(tmp_path / "g"), csr, np.array([1, 2, 3, 4, 5]))
    g = kaminpar.load_graph(str(tmp_path / "g"), kaminpar.GraphFileFormat.PARHIP)
    assert g.n() == 5 and g.m() == len(csr.adjncy) and g.is_node_weighted()
    assert [g.node_weight(v) for v in range(5)] == [1, 2, 3, 4, 5]
    for v in range(5):
        assert sorted(u for u, _ in g.neighbors(v)) == csr.adjncy[csr.xadj[v] : csr.xadj[v + 1]].tolist()


def test_kaminpar_partition_valid_and_seeded():
    from graphshard.datasets import community_graph

    g = community_graph(num_nodes=3000, num_classes=4, seed=1).graph
    src, dst = g.edges[("_N", "_E", "_N")]
    a = kaminpar_partition(lambda: undirected_csr(src, dst, 3000), 4, seed=3, num_threads=1)
    b = kaminpar_partition(lambda: undirected_csr(src, dst, 3000), 4, seed=3, num_threads=1)
    assert np.array_equal(a, b)
    sizes = np.bincount(a, minlength=4)
    assert sizes.max() <= 1.04 * 750

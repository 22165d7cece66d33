"""Neighbour sampling against brute force on small graphs."""

from __future__ import annotations

import numpy as np
import pytest

from graphshard.sampling import CSCGraph, sample_neighbors
from graphshard.sampling.kernels import neighbour_ids, sample_layer


def _graph(seed=0, n=60, m=500, times=False):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    order = np.argsort(dst, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))])
    g = CSCGraph(indptr, src[order], edge_ids=order, node_time=rng.integers(0, 10, n) if times else None)
    return g, src, dst


def _ranges(g, seeds):
    return [set(range(g.indptr[s], g.indptr[s + 1])) for s in seeds]


@pytest.mark.parametrize("fanout,replace", [(-1, False), (3, False), (3, True), (100, False)])
def test_layer_counts_and_ranges(fanout, replace):
    g, _, _ = _graph()
    seeds = np.arange(60)
    counts, pos = sample_layer(g.indptr, g.indices, seeds, fanout, replace=replace, key=7)
    deg = np.diff(g.indptr)
    if fanout < 0:
        assert np.array_equal(counts, deg)
    elif replace:
        assert np.array_equal(counts, np.where(deg > 0, fanout, 0))
    else:
        assert np.array_equal(counts, np.minimum(deg, fanout))
    at = 0
    for s, allowed in zip(seeds, _ranges(g, seeds)):
        picked = pos[at : at + counts[s]].tolist()
        at += counts[s]
        assert set(picked) <= allowed
        if not replace:
            assert len(set(picked)) == len(picked)
        if fanout < 0 or (not replace and fanout >= len(allowed)):
            assert set(picked) == allowed


def test_without_replacement_is_uniform():
    indptr, indices = np.array([0, 10]), np.arange(10)
    hits = np.zeros(10)
    for key in range(3000):
        _, pos = sample_layer(indptr, indices, np.array([0]), 3, replace=False, key=key)
        hits[pos] += 1
    assert np.allclose(hits / 3000, 0.3, atol=0.04)


def test_deterministic_per_key():
    g, _, _ = _graph()
    a = sample_layer(g.indptr, g.indices, np.arange(60), 2, replace=False, key=1)[1]
    b = sample_layer(g.indptr, g.indices, np.arange(60), 2, replace=False, key=1)[1]
    c = sample_layer(g.indptr, g.indices, np.arange(60), 2, replace=False, key=2)[1]
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_temporal_never_newer_than_seed():
    g, _, _ = _graph(times=True)
    seeds = np.arange(60)
    st = np.random.default_rng(3).integers(0, 10, 60)
    for fanout in (-1, 2):
        counts, pos = sample_layer(
            g.indptr, g.indices, seeds, fanout, replace=False, key=5, node_time=g.node_time, seed_time=st
        )
        owner = np.repeat(seeds, counts)
        assert (g.node_time[g.indices[pos]] <= st[owner]).all()
        if fanout < 0:
            expected = sum(int((g.node_time[g.indices[g.indptr[s] : g.indptr[s + 1]]] <= st[s]).sum()) for s in seeds)
            assert counts.sum() == expected


def _brute_force_hops(src, dst, seeds, hops):
    nodes, frontier, edges = list(dict.fromkeys(seeds.tolist())), list(dict.fromkeys(seeds.tolist())), set()
    seen = set(nodes)
    for _ in range(hops):
        new = []
        for v in frontier:
            for e in np.flatnonzero(dst == v).tolist():
                edges.add(e)
                u = int(src[e])
                if u not in seen:
                    seen.add(u)
                    new.append(u)
        frontier = new
        nodes += new
    return set(nodes), edges


def test_full_fanout_equals_brute_force_and_edges_are_real():
    g, src, dst = _graph(1)
    seeds = np.array([3, 17, 3, 42])
    out = sample_neighbors(g, seeds, [-1, -1])
    nodes, edges = _brute_force_hops(src, dst, seeds, 2)
    assert out.node[:3].tolist() == [3, 17, 42] and len(set(out.node.tolist())) == len(out.node)
    assert set(out.node.tolist()) == nodes and set(out.edge.tolist()) == edges
    assert np.array_equal(out.node[out.row], src[out.edge]) and np.array_equal(out.node[out.col], dst[out.edge])
    assert sum(out.num_sampled_nodes) == len(out.node) and sum(out.num_sampled_edges) == len(out.edge)


def test_fanout_bound_and_disjoint_subtrees():
    g, src, dst = _graph(2)
    seeds = np.array([5, 9, 5])
    out = sample_neighbors(g, seeds, [2, 2], disjoint=True, seed=4)
    assert out.node[:3].tolist() == [5, 9, 5]
    assert (out.batch[out.row] == out.batch[out.col]).all()
    assert np.array_equal(out.node[out.row], src[out.edge]) and np.array_equal(out.node[out.col], dst[out.edge])
    per_dst = np.bincount(out.col, minlength=len(out.node))
    assert per_dst.max() <= 2
    with pytest.raises(Exception, match=r"seed IDs must lie in"):
        sample_neighbors(g, np.array([60]), [1])


def test_sampler_object_reuses_workspace_consistently():
    from graphshard.sampling import NeighborSampler

    g, src, dst = _graph(4)
    sampler = NeighborSampler(g, [3, 2])
    for b in range(5):
        seeds = np.array([b, b + 7, b + 20])
        out = sampler.sample(seeds, seed=b)
        ref = sample_neighbors(g, seeds, [3, 2], seed=b)
        assert np.array_equal(out.node, ref.node) and np.array_equal(out.edge, ref.edge)
        assert np.array_equal(out.node[out.row], src[out.edge]) and np.array_equal(out.node[out.col], dst[out.edge])
        assert (sampler._slot.slot == -1).all()


def test_hash_workspace_relabels_as_the_dense_one():
    """The table a distributed sampler uses on a large graph (it grows, from a tiny one, as batches need) gives
    the batches the slot per node gives: same nodes, in the same order, same edges."""
    from graphshard.sampling.neighbor import HashSlot

    g, src, dst = _graph(5, n=3000, m=40000)
    table = HashSlot(capacity=4)
    for b in range(6):
        seeds = np.random.default_rng(b).integers(0, 3000, 50 * (b + 1))
        out = sample_neighbors(g, seeds, [8, 4, -1], seed=b, _slot=table)
        ref = sample_neighbors(g, seeds, [8, 4, -1], seed=b)
        for field in ("node", "row", "col", "edge"):
            assert np.array_equal(getattr(out, field), getattr(ref, field)), field
        assert np.array_equal(out.node[out.row], src[out.edge]) and np.array_equal(out.node[out.col], dst[out.edge])
        assert (table.keys == -1).all() and table.keys.shape[0] >= 2 * out.node.shape[0]


def test_temporal_multi_hop_respects_each_seeds_own_time():
    """The same node seeded twice with different times: each copy's subtree obeys its own time."""
    g, src, dst = _graph(5, times=True)
    seeds = np.array([7, 7, 11, 30])
    st = np.array([2, 9, 5, 0])
    out = sample_neighbors(g, seeds, [-1, -1], seed_time=st)
    assert out.batch is not None and out.node[:4].tolist() == seeds.tolist()
    assert (g.node_time[out.node[out.row]] <= st[out.batch[out.row]]).all()
    assert (out.batch[out.row] == out.batch[out.col]).all()
    for i, s in enumerate(seeds):  # full fanout: hop 1 of copy i = exactly the eligible in-edges
        hop1 = out.edge[(out.col == i)]
        expected = [e for e in np.flatnonzero(dst == s) if g.node_time[src[e]] <= st[i]]
        assert sorted(hop1.tolist()) == sorted(expected)


@pytest.mark.parametrize("index_type", [np.int32, np.int64])
def test_neighbour_ids_computes_inner_ids_as_it_would_read_them(index_type):
    """Sources below ``inner`` get ``start + local`` without reading ``node_gid``; the answer is the plain
    gather's whether the map is read for every source (``inner = 0``) or computed for the inner ones."""
    rng = np.random.default_rng(3)
    inner, halo, start = 50, 30, 1000
    node_gid = np.concatenate([np.arange(start, start + inner), rng.choice(np.arange(5000, 9000), halo, replace=False)])
    indices = rng.integers(0, inner + halo, 400).astype(index_type)
    edge_gid = rng.permutation(400).astype(np.int32)
    pos = rng.integers(0, 400, 250)
    want = (node_gid[indices[pos]], edge_gid[pos].astype(np.int64))
    for k in (0, inner):
        for n in (250, 9, 0):  # longer and shorter than the distances it reads ahead
            nbrs, edges = neighbour_ids(pos[:n], indices, node_gid, edge_gid, k, start)
            assert nbrs.dtype == edges.dtype == np.int64
            np.testing.assert_array_equal(nbrs, want[0][:n])
            np.testing.assert_array_equal(edges, want[1][:n])
    assert (indices[pos] >= inner).any() and (indices[pos] < inner).any()  # both kinds were asked for


def test_cscgraph_takes_the_tensors_load_partition_returns(tmp_path):
    """A partition's in-adjacency as `load_partition` returns it (torch tensors, compact int32) samples as the
    same arrays in NumPy do."""
    import torch

    from graphshard import load_partition, partition_graph
    from tests.graphs import small_homo

    partition_graph(small_homo(), "h", 2, tmp_path, part_method="random")
    pg = load_partition(tmp_path / "h.json", 0).graph
    assert isinstance(pg.indptr, torch.Tensor)
    from_tensors = CSCGraph(pg.indptr, pg.indices)
    from_arrays = CSCGraph(pg.indptr.numpy(), pg.indices.numpy())
    seeds = np.arange(min(8, from_arrays.num_nodes))
    a = sample_neighbors(from_tensors, seeds, [3, 2], seed=5)
    b = sample_neighbors(from_arrays, seeds, [3, 2], seed=5)
    assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("row", "col", "node"))

"""Distributed sampling on 2 ranks equals single-process sampling of the original graph (fanout -1);
with fanout k every sampled edge is an original edge and each seed has at most k in-edges."""

from __future__ import annotations

import numpy as np
import pytest

from graphshard import partition_graph
from graphshard.distributed.ranks.launcher import launch
from tests.graphs import small_homo


def _graph():
    g = small_homo()
    g.node_feats["_N"]["time"] = np.random.default_rng(7).integers(0, 10, g.num_nodes["_N"])
    return g


def _reference(g, seeds_orig, fanouts, seed_time=None):
    from graphshard.sampling import CSCGraph, sample_neighbors

    src, dst = g.edges[("_N", "_E", "_N")]
    order = np.argsort(dst, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=g.num_nodes["_N"]))])
    csc = CSCGraph(indptr, src[order], edge_ids=order, node_time=g.node_feats["_N"]["time"])
    return sample_neighbors(csc, seeds_orig, fanouts, seed_time=seed_time)


def _worker(config: str, colocated: bool = True) -> None:
    from graphshard.distributed.remote.sampler import DistNeighborSampler
    from graphshard.distributed.runtime.graph import DistGraph
    from graphshard.distributed.runtime.session import session

    g = _graph()
    src, dst = g.edges[("_N", "_E", "_N")]
    with session(timeout=30) as ctx:
        group = ctx.group
        dg = DistGraph("s", config, colocated=colocated)
        book = dg.get_partition_book()
        near = dg.near_graphs  # empty unless co-located
        local = dg.sampling_graph  # partitions as written number their inner nodes first, in order: IDs computed
        assert local.inner == local.count > 0
        seeds_orig = np.array([5, 17, 100, 233, 5]) + ctx.rank
        seeds = book.from_original("_N", seeds_orig).numpy()
        before = group.channels.stats["requests"]  # what follows asks for neighbours only
        full = DistNeighborSampler(group, dg.sampling_graph, book, [-1, -1], near=near).sample(seeds)
        ref = _reference(g, seeds_orig, [-1, -1])
        to_orig = lambda ids: book.to_original("_N", ids).numpy()  # noqa: E731
        assert to_orig(full.node).tolist() == ref.node.tolist()  # same nodes, same order
        assert full.num_sampled_nodes == ref.num_sampled_nodes
        eorig = book.to_original_eids("_N:_E:_N", full.edge).numpy()
        assert sorted(eorig.tolist()) == sorted(ref.edge.tolist())
        assert np.array_equal(to_orig(full.node[full.row]), src[eorig])
        assert np.array_equal(to_orig(full.node[full.col]), dst[eorig])
        few = DistNeighborSampler(group, dg.sampling_graph, book, [2, 2], near=near).sample(seeds, seed=3)
        eorig = book.to_original_eids("_N:_E:_N", few.edge).numpy()
        assert np.array_equal(to_orig(few.node[few.row]), src[eorig])
        assert np.bincount(few.col, minlength=len(few.node)).max() <= 2
        rep = DistNeighborSampler(group, dg.sampling_graph, book, [3, 3], replace=True, near=near).sample(seeds, seed=4)
        indeg = np.bincount(dst, minlength=240)[to_orig(rep.node)]
        expanded = np.arange(len(rep.node)) < sum(rep.num_sampled_nodes[:2])  # nodes of hops 0 and 1
        per_node = np.bincount(rep.col, minlength=len(rep.node))
        assert np.array_equal(per_node[expanded], np.where(indeg[expanded] > 0, 3, 0))
        # temporal: the same seed twice with different times; every hop obeys its own seed's time
        seed_time = np.array([3, 8, 5, 9, 1])
        tmp = DistNeighborSampler(group, dg.sampling_graph, book, [-1, -1], time_attr="time", near=near)
        out = tmp.sample(seeds, seed_time=seed_time)
        times = g.node_feats["_N"]["time"]
        assert (times[to_orig(out.node[out.row])] <= seed_time[out.batch[out.row]]).all()
        ref = _reference(g, seeds_orig, [-1, -1], seed_time)
        assert to_orig(out.node).tolist() == ref.node.tolist() and out.batch.tolist() == ref.batch.tolist()
        assert book.to_original_eids("_N:_E:_N", out.edge).tolist() == ref.edge.tolist()
        # the requests went the way asked: in-process, or through the channels
        assert (group.channels.stats["requests"] > before) == (not colocated)


@pytest.mark.parametrize("colocated", [True, False], ids=["in-process", "channels"])
def test_distributed_sampling_equals_single_process(tmp_path, colocated):
    """Whichever way the other partition is read: in-process (co-located), or over the channels."""
    partition_graph(_graph(), "s", 2, tmp_path, part_method="metis", num_hops=1)
    launch(_worker, 2, (str(tmp_path / "s.json"), colocated), timeout=60)

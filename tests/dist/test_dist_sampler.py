"""Distributed sampling on 2 ranks equals single-process sampling of the original graph (fanout -1);
with fanout k every sampled edge is an original edge and each seed has at most k in-edges."""

from __future__ import annotations

import numpy as np

from graphshard import partition_graph
from graphshard.dist.launch import launch
from tests.graphs import small_homo


def _reference(g, seeds_orig, fanouts):
    from graphshard.sampling import CSCGraph, sample_neighbors
    src, dst = g.edges[("_N", "_E", "_N")]
    order = np.argsort(dst, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=g.num_nodes["_N"]))])
    return sample_neighbors(CSCGraph(indptr, src[order], edge_ids=order), seeds_orig, fanouts)


def _worker(config: str) -> None:
    from graphshard import load_partition
    from graphshard.dist.context import DistContext
    from graphshard.dist.rpc import init_rpc, shutdown_rpc
    from graphshard.dist.sampler import DistNeighborSampler

    g = small_homo()
    src, dst = g.edges[("_N", "_E", "_N")]
    with DistContext.from_env(timeout=30) as ctx:
        init_rpc(ctx)
        try:
            part = load_partition(config, ctx.rank)
            book = part.partition_book
            seeds_orig = np.array([5, 17, 100, 233, 5]) + ctx.rank
            seeds = book.from_original("_N", seeds_orig).numpy()
            full = DistNeighborSampler(ctx, part.graph, book, [-1, -1]).sample(seeds)
            ref = _reference(g, seeds_orig, [-1, -1])
            to_orig = lambda ids: book.to_original("_N", ids).numpy()  # noqa: E731
            assert to_orig(full.node).tolist() == ref.node.tolist()  # same nodes, same order
            assert full.num_sampled_nodes == ref.num_sampled_nodes
            eorig = book.to_original_eids("_N:_E:_N", full.edge).numpy()
            assert sorted(eorig.tolist()) == sorted(ref.edge.tolist())
            assert np.array_equal(to_orig(full.node[full.row]), src[eorig])
            assert np.array_equal(to_orig(full.node[full.col]), dst[eorig])
            few = DistNeighborSampler(ctx, part.graph, book, [2, 2]).sample(seeds, seed=3)
            eorig = book.to_original_eids("_N:_E:_N", few.edge).numpy()
            assert np.array_equal(to_orig(few.node[few.row]), src[eorig])
            assert np.bincount(few.col, minlength=len(few.node)).max() <= 2
        finally:
            shutdown_rpc(ctx)


def test_distributed_sampling_equals_single_process(tmp_path):
    partition_graph(small_homo(), "s", 2, tmp_path, part_method="metis", num_hops=1)
    launch(_worker, 2, (str(tmp_path / "s.json"),), timeout=60)

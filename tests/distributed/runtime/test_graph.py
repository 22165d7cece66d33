"""DistGraph, DistTensor, DistEmbedding and heterogeneous sampling on 2 ranks, checked against the
original graph (mapped through original IDs)."""

from __future__ import annotations

import numpy as np
import pytest

from graphshard import partition_graph
from graphshard.distributed.ranks.launcher import launch
from tests.graphs import small_hetero, small_homo


def _check_graph(g, dg, rank):
    import torch

    book = dg.get_partition_book()
    assert dg.ntypes == list(g.num_nodes) and set(dg.canonical_etypes) == set(g.edges)
    for t, n in g.num_nodes.items():
        assert dg.num_nodes(t) == n
    for et, (src, dst) in g.edges.items():
        assert dg.num_edges(et) == len(src)
        for kind, ends, ntype in (("in", dst, et[2]), ("out", src, et[0])):
            n = g.num_nodes[ntype]
            if n == 0:
                continue
            ids = torch.from_numpy(np.random.default_rng(rank).permutation(n))
            got = (dg.in_degrees if kind == "in" else dg.out_degrees)(ids, et).numpy()
            expected = np.bincount(ends, minlength=n)[book.to_original(ntype, ids).numpy()]
            assert np.array_equal(got, expected), (kind, et)
    for t, feats in g.node_feats.items():
        ids = np.arange(g.num_nodes[t])[::-1].copy()
        for name, full in feats.items():
            assert np.array_equal(dg.nodes[t].data[name][ids].numpy(), full[book.to_original(t, ids).numpy()])


def _check_tensors(dg, rank):
    import torch

    from graphshard.distributed.remote.embedding import DistEmbedding, SparseAdagrad
    from graphshard.distributed.remote.tensor import DistTensor

    book = dg.get_partition_book()
    t = DistTensor(dg.group, book, (60, 2), torch.float32, name="scores", ntype="paper")
    mine = np.arange(rank, 60, 2)
    t[mine] = torch.from_numpy(np.stack([mine * 10.0 + rank, -mine], axis=1))
    dg.barrier()
    ids = np.arange(60)
    assert np.array_equal(t[ids].numpy(), np.stack([ids * 10.0 + ids % 2, -ids], axis=1))
    et = ("paper", "cites", "paper")
    e = DistTensor(dg.group, book, (dg.num_edges(et),), torch.int64, name="marks", etype=et)
    e[np.arange(rank, dg.num_edges(et), 2)] = 7 + rank
    dg.barrier()
    assert np.array_equal(e[np.arange(dg.num_edges(et))].numpy(), 7 + np.arange(dg.num_edges(et)) % 2)

    emb = DistEmbedding(dg.group, book, 25, 4, name="author_emb", ntype="author")
    before = emb.weight[np.arange(25)].clone()
    dg.barrier()
    opt = SparseAdagrad([emb], lr=0.5)
    emb(np.array([0, 1, 2] if rank == 0 else [2, 3])).sum().backward()
    opt.step()
    dg.barrier()
    delta = (emb.weight[np.arange(25)] - before).numpy()
    expected = np.zeros((25, 4))
    expected[[0, 1, 3]] = -0.5
    expected[2] = -0.5  # both ranks' gradients (1 each) sum to 2 before one update: 0.5 * 2 / sqrt(2**2)
    assert np.allclose(delta, expected, atol=1e-6)


def _check_hetero_sampling(g, dg, rank):
    from graphshard.distributed.remote.sampler import DistNeighborSampler

    book = dg.get_partition_book()
    seeds_orig = np.array([3, 10, 41]) + rank
    seeds = book.map_to_homo_nid(book.from_original("paper", seeds_orig), "paper").numpy()
    full = DistNeighborSampler(dg.group, dg.sampling_graph, book, [-1, -1])
    out = full.to_hetero(full.sample(seeds))
    assert book.to_original("paper", out.node["paper"][:3]).tolist() == seeds_orig.tolist()
    # brute force over the original graph: in-edges of every frontier node, two hops
    frontier, seen, expected = {("paper", int(s)) for s in seeds_orig}, {("paper", int(s)) for s in seeds_orig}, set()
    for _ in range(2):
        new = set()
        for et, (src, dst) in g.edges.items():
            for e in np.flatnonzero(np.isin(dst, [v for t, v in frontier if t == et[2]])).tolist():
                expected.add((et, e))
                if (et[0], int(src[e])) not in seen:
                    new.add((et[0], int(src[e])))
        seen |= new
        frontier = new
    got = {(et, int(e)) for et, ids in out.edge.items() for e in book.to_original_eids(et, ids).numpy()}
    assert got == expected
    for et, ids in out.edge.items():  # rows/cols point at the right endpoints
        src, dst = g.edges[et]
        eo = book.to_original_eids(et, ids).numpy()
        assert np.array_equal(book.to_original(et[0], out.node[et[0]][out.row[et]]).numpy(), src[eo])
        assert np.array_equal(book.to_original(et[2], out.node[et[2]][out.col[et]]).numpy(), dst[eo])
    typed = DistNeighborSampler(
        dg.group, dg.sampling_graph, book, {"paper:cites:paper": [2, 2], "author:writes:paper": [1, 0]}
    )
    out = typed.to_hetero(typed.sample(seeds, seed=5))
    assert out.edge[("paper", "published_in", "venue")].size == 0
    assert sum(out.num_sampled_edges[("author", "writes", "paper")][2:]) == 0  # fanout 0 in hop 2
    for et, k in ((("paper", "cites", "paper"), 2), (("author", "writes", "paper"), 1)):
        assert np.bincount(out.col[et]).max(initial=0) <= k
        src, dst = g.edges[et]
        eo = book.to_original_eids(et, out.edge[et]).numpy()
        assert np.array_equal(book.to_original(et[0], out.node[et[0]][out.row[et]]).numpy(), src[eo])


def _hetero_worker(config):
    from graphshard.distributed.runtime.graph import DistGraph
    from graphshard.distributed.runtime.session import session

    g = small_hetero()
    with session(timeout=30) as ctx:
        dg = DistGraph("h", config)
        _check_graph(g, dg, ctx.rank)
        _check_tensors(dg, ctx.rank)
        _check_hetero_sampling(g, dg, ctx.rank)


@pytest.mark.parametrize("parts", [2, 4])
def test_dist_graph_tensors_embeddings_and_hetero_sampling(tmp_path, parts):
    """Also with 4 partitions on 2 processes, each serving two of them as one."""
    partition_graph(small_hetero(), "h", parts, tmp_path, part_method="metis", num_hops=1)
    launch(_hetero_worker, 2, (str(tmp_path / "h.json"),), timeout=90)


def _shared_worker(config):
    import torch

    from graphshard.distributed.remote.tensor import DistTensor
    from graphshard.distributed.runtime.graph import DistGraph
    from graphshard.distributed.runtime.session import session

    g = small_homo()
    src, dst = g.edges[("_N", "_E", "_N")]
    with session(timeout=30) as ctx:
        group = ctx.group
        dg = DistGraph("s", config)
        assert dg.part_id == 0  # two trainers share the single partition
        ids = np.arange(240)
        assert np.array_equal(dg.out_degrees(ids).numpy(), np.bincount(src, minlength=240))
        assert np.array_equal(dg.in_degrees(ids).numpy(), np.bincount(dst, minlength=240))
        t = DistTensor(group, dg.book, (240,), torch.float64, name="x")
        t[np.arange(ctx.rank, 240, 2)] = torch.tensor(1.0 + ctx.rank)
        dg.barrier()
        assert np.array_equal(t[ids].numpy(), 1.0 + ids % 2)
        assert np.array_equal(
            dg.ndata["feat"][ids].numpy(), g.node_feats["_N"]["feat"][dg.book.to_original("_N", ids).numpy()]
        )


def test_two_trainers_share_one_partition(tmp_path):
    partition_graph(small_homo(), "s", 1, tmp_path)
    launch(_shared_worker, 2, (str(tmp_path / "s.json"),), timeout=90)


def _open_my_graph(configs: list[str], names: list[str]) -> None:
    import os

    from graphshard.distributed.runtime.graph import DistGraph
    from graphshard.distributed.runtime.session import session

    rank = int(os.environ["RANK"])
    with session(timeout=30):
        DistGraph(names[rank], configs[rank])


def test_ranks_given_different_graphs_are_told_so(tmp_path):
    """Each rank given another partitioned graph (a copy-paste slip across hosts): the run stops at once with one
    line naming both graphs, not later on a request one rank cannot answer."""
    from graphshard.errors import DistError

    partition_graph(small_homo(), "a", 2, tmp_path / "a", part_method="random")
    partition_graph(small_hetero(), "b", 2, tmp_path / "b", part_method="random")
    configs = [str(tmp_path / "a" / "a.json"), str(tmp_path / "b" / "b.json")]
    with pytest.raises(DistError, match=r"the ranks were given different graphs: .*'a' .*'b' .*same partition config"):
        launch(_open_my_graph, 2, (configs, ["a", "b"]), timeout=60)

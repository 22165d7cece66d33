"""Distributed loaders on 2 ranks: batches checked against the original graph, the same with and without
sampler workers, equal batch counts; a sampler error and a dead rank surface as errors, never hangs."""

from __future__ import annotations

import time

import numpy as np
import pytest

from graphshard import partition_graph
from graphshard.distributed.ranks.context import DistError
from graphshard.distributed.ranks.launcher import launch
from tests.graphs import small_hetero, small_homo


def _check_node_batch(g, book, data, seeds):
    src, dst = g.edges[("_N", "_E", "_N")]
    orig = book.to_original("_N", data.n_id).numpy()
    assert orig[: len(seeds)].tolist() == book.to_original("_N", seeds).tolist()
    assert np.array_equal(data.x.numpy(), g.node_feats["_N"]["feat"][orig])
    if seeds.numel():  # node batches carry labels; link batches (label_name=None) do not
        assert np.array_equal(data.y.numpy(), g.node_feats["_N"]["label"][orig])
    eo = book.to_original_eids("_N:_E:_N", data.e_id).numpy()
    if seeds.numel():  # node batches carry the split masks, as PyG's loaders give them, and the edge feature
        for mask in ("train_mask", "val_mask", "test_mask"):
            assert np.array_equal(data[mask].numpy(), g.node_feats["_N"][mask][orig]), mask
        assert np.array_equal(data.edge_attr.numpy(), g.edge_feats[("_N", "_E", "_N")]["w"][eo])
    assert np.array_equal(orig[data.edge_index[0].numpy()], src[eo])
    assert np.array_equal(orig[data.edge_index[1].numpy()], dst[eo])
    assert sum(data.num_sampled_nodes) == data.num_nodes and sum(data.num_sampled_edges) == data.e_id.numel()


def _homo_checks(g, dg, rank):
    from graphshard.distributed.loaders.loader import DistLinkNeighborLoader, DistNeighborLoader

    book = dg.get_partition_book()
    mine = book.partid2nids(rank).numpy()[: 10 if rank == 0 else 25]  # unequal seed counts
    batches = {}
    for workers in (0, 1):
        with DistNeighborLoader(
            dg, [3, 2], mine, batch_size=8, shuffle=True, num_workers=workers, seed=1, edge_feat_name="w"
        ) as loader:
            assert len(loader) == 4  # ceil(25 / 8) on both ranks
            batches[workers] = list(loader)
    assert len(batches[0]) == len(batches[1]) == 4
    seen = []
    for a, b in zip(batches[0], batches[1]):
        assert np.array_equal(a.n_id.numpy(), b.n_id.numpy()) and np.array_equal(
            a.edge_index.numpy(), b.edge_index.numpy()
        )
        _check_node_batch(g, book, a, a.n_id[: a.batch_size])
        assert np.array_equal(mine[a.input_id.numpy()], a.n_id[: a.batch_size].numpy())  # PyG's input_id
        seen += a.n_id[: a.batch_size].tolist()
    assert set(seen) == set(mine.tolist())  # every seed served (rank 0 tops up with repeats)

    src, dst = g.edges[("_N", "_E", "_N")]
    pick = np.arange(rank, 40, 2)
    pairs = np.stack([book.from_original("_N", src[pick]).numpy(), book.from_original("_N", dst[pick]).numpy()])
    for mode in ("binary", "triplet"):
        loader = DistLinkNeighborLoader(dg, [2, 2], pairs, batch_size=8, neg_sampling=mode, neg_amount=2)
        at = 0
        for data in loader:
            orig = book.to_original("_N", data.n_id).numpy()
            n = data.input_id.numel()
            want_s, want_d = src[pick[at : at + n]], dst[pick[at : at + n]]
            assert np.array_equal(data.input_id.numpy(), np.arange(at, at + n))  # positions in edge_label_index
            at += n
            if mode == "binary":
                eli = data.edge_label_index.numpy()
                assert eli.shape == (2, 3 * n) and data.edge_label.tolist() == [1.0] * n + [0.0] * (2 * n)
                assert np.array_equal(orig[eli[0, :n]], want_s) and np.array_equal(orig[eli[1, :n]], want_d)
            else:
                assert data.dst_neg_index.shape == (n, 2)
                assert np.array_equal(orig[data.src_index.numpy()], want_s)
                assert np.array_equal(orig[data.dst_pos_index.numpy()], want_d)
            _check_node_batch(g, book, data, data.n_id[:0])
        assert at == len(pick)


def _hetero_checks(g, dg, rank):
    from torch_geometric.data import HeteroData

    from graphshard.distributed.loaders.loader import DistNeighborLoader

    book = dg.get_partition_book()
    seeds = book.partid2nids(rank, "paper").numpy()[:12]
    loader = DistNeighborLoader(
        dg,
        {"paper:cites:paper": [3, 3], "author:writes:paper": [2, 2]},
        seeds,
        batch_size=5,
        input_type="paper",
        num_workers=1,
    )
    with loader:
        for data in loader:
            assert isinstance(data, HeteroData) and data["paper"].batch_size <= 5
            p_orig = book.to_original("paper", data["paper"].n_id).numpy()
            assert np.array_equal(data["paper"].x.numpy(), g.node_feats["paper"]["feat"][p_orig])
            assert np.array_equal(data["paper"].y.numpy(), g.node_feats["paper"]["label"][p_orig])
            for et in (("paper", "cites", "paper"), ("author", "writes", "paper")):
                src, dst = g.edges[et]
                eo = book.to_original_eids(et, data[et].e_id).numpy()
                s_orig = book.to_original(et[0], data[et[0]].n_id).numpy()
                assert np.array_equal(s_orig[data[et].edge_index[0].numpy()], src[eo])
                assert np.array_equal(p_orig[data[et].edge_index[1].numpy()], dst[eo])


def _worker(homo_config, hetero_config):
    from graphshard.distributed.runtime.graph import DistGraph
    from graphshard.distributed.runtime.session import session

    with session(timeout=60) as s:
        _homo_checks(small_homo(), DistGraph("s", homo_config), s.rank)
        _hetero_checks(small_hetero(), DistGraph("h", hetero_config), s.rank)


def test_loaders_match_the_original_graph(tmp_path):
    partition_graph(small_homo(), "s", 2, tmp_path / "s", part_method="random", num_hops=1)
    partition_graph(small_hetero(), "h", 2, tmp_path / "h", part_method="metis", num_hops=1)
    launch(_worker, 2, (str(tmp_path / "s" / "s.json"), str(tmp_path / "h" / "h.json")), timeout=240)


DEAD_RANK_HEARTBEAT = 2.0  # seconds of silence after which the survivor names the dead rank (6 s by default)


def _failing_worker(config, scenario):
    import os

    from graphshard.distributed.loaders.loader import DistNeighborLoader
    from graphshard.distributed.runtime.graph import DistGraph
    from graphshard.distributed.runtime.session import session

    # a rank that dies is found by the heartbeat: the test waits for its bound, so the smallest sensible one
    with session(timeout=20, heartbeat_timeout=DEAD_RANK_HEARTBEAT if scenario == "dead-rank" else None) as s:
        dg = DistGraph("s", config)
        seeds = dg.get_partition_book().partid2nids(s.rank).numpy()
        if scenario == "sampler-error":
            loader = DistNeighborLoader(
                dg,
                [2, 2],
                seeds,
                batch_size=16,
                num_workers=1,
                time_attr="no_such_time",
                input_time=np.zeros(len(seeds)),
            )
        else:
            loader = DistNeighborLoader(dg, [5, 5], seeds, batch_size=4, num_workers=1)
        with loader:
            for b, _ in enumerate(loader):
                if scenario == "dead-rank" and s.rank == 1 and b == 1:
                    os._exit(0)  # dies silently, mid-epoch, with its sampler worker


def test_sampler_error_reaches_the_training_loop(tmp_path):
    partition_graph(small_homo(), "s", 2, tmp_path, part_method="random")
    with pytest.raises(
        DistError, match=r"rank \d failed: .*rank \d, sampler worker 0: .*no node type has the time attribute"
    ):
        launch(_failing_worker, 2, (str(tmp_path / "s.json"), "sampler-error"), timeout=120)


def test_dead_rank_makes_the_others_fail_within_the_timeout(tmp_path):
    partition_graph(small_homo(), "s", 2, tmp_path, part_method="random")
    start = time.monotonic()
    # the culprit is named first: rank 1 (or its sampler worker, which died with it), never the survivor
    with pytest.raises(DistError, match=r"^(rank 1 exited with code 0|sampler worker 0 of rank 1 died)"):
        launch(_failing_worker, 2, (str(tmp_path / "s.json"), "dead-rank"), timeout=120)
    assert time.monotonic() - start < 90


def test_drop_pair_edges_removes_seed_links_both_ways_and_recounts_hops():
    from graphshard.distributed.loaders.batch import drop_pair_edges
    from graphshard.sampling import CSCGraph, sample_neighbors

    rng = np.random.default_rng(3)
    n = 40
    dst = np.sort(rng.integers(0, n, 400))
    src = rng.integers(0, n, 400)
    out = sample_neighbors(CSCGraph(np.searchsorted(dst, np.arange(n + 1)), src), np.array([1, 2, 3]), [5, 5], seed=2)
    u, v = out.node[out.row], out.node[out.col]
    pick = [0, len(u) - 1]  # one edge of each hop: its link must go, both ways
    kept = drop_pair_edges(out, u[pick], v[pick], n)
    banned = {(int(a), int(b)) for a, b in zip(u[pick], v[pick])} | {(int(b), int(a)) for a, b in zip(u[pick], v[pick])}
    before = list(zip(out.node[out.row].tolist(), out.node[out.col].tolist(), out.edge.tolist()))
    expected = [e for e in before if (e[0], e[1]) not in banned]
    assert len(expected) < len(before)  # the sample does contain such edges
    assert list(zip(kept.node[kept.row].tolist(), kept.node[kept.col].tolist(), kept.edge.tolist())) == expected
    hop = np.repeat(np.arange(len(out.num_sampled_edges)), out.num_sampled_edges)
    assert kept.num_sampled_edges == [
        sum(1 for h, e in zip(hop, before) if h == k and (e[0], e[1]) not in banned)
        for k in range(len(out.num_sampled_edges))
    ]

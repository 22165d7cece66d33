"""Co-located partitions: which ones a process reads itself (the same files of a server on the same host), and
that reading them in-process gives what the original graph holds, with no feature row sent over RPC."""

from __future__ import annotations

import json
import shutil

import numpy as np

from graphshard import partition_graph
from graphshard.distributed.groups.rpc import RpcGroup
from graphshard.distributed.ranks.launcher import launch
from graphshard.distributed.remote.colocated import colocated_parts, file_marks, host_key
from graphshard.format.config import as_config
from tests.distributed.remote.test_dist_sampler import _graph, _reference
from tests.graphs import small_hetero, small_homo


class _Told(RpcGroup):
    """Member 0 of 2, told what member 1 publishes."""

    def __init__(self, theirs: dict):
        super().__init__(0, ["rank0", "rank1"], None, 5.0)
        self.theirs = theirs

    def all_gather(self, value: bytes, what: str) -> list[bytes]:
        return [value, json.dumps(self.theirs).encode()]


def test_only_the_same_files_on_the_same_host_are_read_in_process(tmp_path):
    partition_graph(small_homo(), "s", 2, tmp_path / "a", part_method="random", num_hops=1)
    cfg = as_config(tmp_path / "a" / "s.json")
    same = {"host": host_key(), "files": file_marks(cfg, range(1, 2))}
    assert colocated_parts(cfg, _Told(same)) == [1]
    assert colocated_parts(cfg, _Told(same | {"host": "elsewhere/boot/1"})) == []
    assert colocated_parts(cfg, _Told(same | {"files": None})) == []  # the server lacks a file
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # equal bytes, other files: the server's own copy
    copy = {"host": host_key(), "files": file_marks(as_config(tmp_path / "b" / "s.json"), range(1, 2))}
    assert colocated_parts(cfg, _Told(copy)) == []
    (tmp_path / "a" / "part1").rename(tmp_path / "a" / "moved")  # this process no longer sees them
    assert colocated_parts(cfg, _Told(same)) == []


def _worker(homo: str, hetero: str) -> None:
    import torch

    from graphshard.distributed.host.threads import rank_threads
    from graphshard.distributed.loaders import prefetch
    from graphshard.distributed.loaders.loader import DistNeighborLoader
    from graphshard.distributed.remote.sampler import DistNeighborSampler
    from graphshard.distributed.runtime.graph import DistGraph
    from graphshard.distributed.runtime.session import session

    g = _graph()
    with session(timeout=60) as s:
        near, far = DistGraph("s", homo), DistGraph("s", homo, colocated=False)
        assert set(near.near_graphs) == {1 - s.rank} and not far.near_graphs
        book = near.get_partition_book()
        # every row of the graph, read against the original features
        ids = np.arange(g.num_nodes["_N"])[::-1].copy()
        want = g.node_feats["_N"]["feat"][book.to_original("_N", ids).numpy()]
        assert np.array_equal(near.nodes["_N"].data["feat"][ids].numpy(), want)
        assert near.features.stats["colocated_rows"] > 0 and near.features.stats["remote_rows"] == 0
        # sampling over both partitions in-process equals sampling the original graph (every in-edge)
        seeds_orig = np.array([5, 17, 100, 233, 5]) + s.rank
        seeds = book.from_original("_N", seeds_orig).numpy()
        sampler = DistNeighborSampler(s.group, near.sampling_graph, book, [-1, -1], near=near.near_graphs)
        out, ref = sampler.sample(seeds), _reference(g, seeds_orig, [-1, -1])
        assert book.to_original("_N", out.node).tolist() == ref.node.tolist()
        assert sorted(book.to_original_eids("_N:_E:_N", out.edge).tolist()) == sorted(ref.edge.tolist())
        assert sampler.stats["remote_requests"] == 0 and sampler.stats["colocated_seeds"] > 0
        # a loader's batches are the same whether the other partition is read in-process or over RPC
        seeds = book.partid2nids(s.rank).numpy()
        batches, ahead, lowered = [], [], []
        fetched = []
        lower = prefetch.lower_this_thread
        prefetch.lower_this_thread = lambda steps: (lowered[-1].add(steps), lower(steps))
        for graph in (near, far):
            lowered.append(set())
            if graph is far:  # over RPC, a second builder starts at once: the batches and counts must not change
                prefetch.WINDOW, prefetch.STALLED, prefetch.IDLE = 1, 0.0, float("inf")
            received = graph.features.stats["bytes_received"]
            with DistNeighborLoader(graph, [3, 2], seeds, batch_size=16, shuffle=True, seed=5) as loader:
                batches.append(list(loader))
                ahead.append(loader.prefetch)
            fetched.append((sum(b.fetch_bytes for b in batches[-1]), graph.features.stats["bytes_received"] - received))
        assert len(loader._makers) == 2  # builders of the RPC loader
        assert fetched[1][0] == fetched[1][1] > 0, fetched  # each batch counted its own thread's bytes
        # over RPC the next batches are built ahead (their answers awaited while the model computes); in-process,
        # only with a core to spare per rank
        assert ahead == [2 if rank_threads() >= 2 else 0, 4], ahead
        # builders of batches read in-process yield to the step; builders waiting on another process do not
        assert lowered == [{10} if rank_threads() >= 2 else set(), {0}], lowered
        for a, b in zip(*batches, strict=True):
            for key in ("n_id", "x", "y", "edge_index", "e_id"):
                assert torch.equal(a[key], b[key]), key
        assert sum(b.fetch_bytes for b in batches[0]) == 0 < sum(b.fetch_bytes for b in batches[1])
        # several stored partitions served as one (4 on 2 processes), heterogeneous
        h = small_hetero()
        dg = DistGraph("h", hetero)
        book = dg.get_partition_book()
        assert set(dg.near_graphs) == {1 - s.rank}
        for t, feats in h.node_feats.items():
            ids = np.arange(h.num_nodes[t])[::-1].copy()
            for name, full in feats.items():
                assert np.array_equal(dg.nodes[t].data[name][ids].numpy(), full[book.to_original(t, ids).numpy()])
        assert dg.features.stats["remote_rows"] == 0


def test_co_located_reads_equal_the_original_graph(tmp_path):
    partition_graph(_graph(), "s", 2, tmp_path / "s", part_method="metis", num_hops=1)
    partition_graph(small_hetero(), "h", 4, tmp_path / "h", part_method="metis", num_hops=1)
    launch(_worker, 2, (str(tmp_path / "s" / "s.json"), str(tmp_path / "h" / "h.json")), timeout=120)

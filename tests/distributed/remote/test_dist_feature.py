"""Distributed feature lookup on 2 ranks: every rank reads every row of every type; errors name the owner;
writes stay in the writing rank's store object."""

from __future__ import annotations

import numpy as np
import pytest

from graphshard import partition_graph
from graphshard.distributed.ranks.context import DistError
from graphshard.distributed.ranks.launcher import launch
from tests.graphs import small_hetero, sparse_hetero


def _pyg_checks(g, book, store) -> None:
    """The store on PyG's FeatureStore interface: global per-type IDs, every index form, whole-graph
    sizes, KeyError for what is missing."""
    import torch

    for t, feats in g.node_feats.items():
        n = g.num_nodes[t]
        for name, full in feats.items():
            want = full[book.to_original(t, torch.arange(n)).numpy()]
            pyg = {"feat": "x", "label": "y"}.get(name, name)
            assert store.get_tensor_size(t, pyg) == want.shape
            whole = store.get_tensor(t, pyg, index=None)  # every row of the graph, remote ones included
            assert np.array_equal(whole.numpy(), want)
            assert np.array_equal(store[t, name, 3:n:4].numpy(), want[3:n:4])
            assert np.array_equal(store[t, name, [n - 1, 0]].numpy(), want[[n - 1, 0]])
            assert np.array_equal(store[t][pyg][5].numpy(), want[5])
    cites = ("paper", "cites", "paper")
    assert np.array_equal(
        store[cites, "weight", :].numpy(),
        g.edge_feats[cites]["weight"][book.to_original_eids(cites, torch.arange(g.num_edges(cites))).numpy()],
    )
    assert {(a.group_name, a.attr_name) for a in store.get_all_tensor_attrs()} == {
        ("paper", "x"),
        ("paper", "y"),
        ("author", "emb"),
        (cites, "weight"),
    }
    for bad in (("nope", "x"), ("paper", "nope"), (None, "x")):
        with pytest.raises(KeyError):
            store.get_tensor(*bad, index=None)
        assert store.get_tensor_size(*bad) is None


def _overlay_checks(g, book, store, rank: int) -> None:
    """Writes are this rank's store object's: rank 0 puts a placeholder for 'venue' (every row of the graph)
    and updates rows of 'paper'/'x' owned by rank 1; its reads see them, rank 1's reads of its own rows
    and rank 0's requests for stored rows see the stored data."""
    import torch
    from torch_geometric.data import TensorAttr

    n = g.num_nodes["paper"]
    want = torch.from_numpy(g.node_feats["paper"]["feat"][book.to_original("paper", torch.arange(n)).numpy()])
    theirs = book.partid2nids(1, "paper")[:3]
    if rank == 0:
        store.put_tensor(torch.arange(3.0)[:, None], "venue", "x", index=None)
        store.update_tensor(torch.zeros(3, 5), TensorAttr("paper", "x", theirs))
        want[theirs] = 0.0
        assert ("venue", "x") in {(a.group_name, a.attr_name) for a in store.get_all_tensor_attrs()}
        assert torch.equal(store.lookup("venue", "x", [2, 0]), torch.tensor([[2.0], [0.0]]))
        assert not store.is_sparse("paper", "x") and store.row_nbytes("venue", "x") == 4
    store.group.barrier("overlay written")
    assert torch.equal(store["paper", "x", None], want)  # rank 0: its update; rank 1: the stored rows
    got = store.lookup_many([("paper", "feat", theirs), ("paper", "y", theirs)])
    assert torch.equal(got[0], want[theirs]) and got[1].shape == (3,)
    assert (store.get_tensor_size("venue", "x") == (3, 1)) == (rank == 0)
    store.group.barrier("overlay read")


def _worker(config: str, check_error: bool, sparse: bool = False) -> None:
    import os

    import torch

    from graphshard import load_partition
    from graphshard.distributed.groups.rpc import init_rpc, shutdown_rpc
    from graphshard.distributed.ranks.context import DistContext
    from graphshard.distributed.remote.feature import DistFeatureStore
    from graphshard.distributed.stores.local import LocalFeatureStore

    g = sparse_hetero() if sparse else small_hetero()
    with DistContext.from_env(timeout=30) as ctx:
        group = init_rpc(ctx)
        graceful = True
        try:
            part = load_partition(config, ctx.rank)
            book = part.partition_book
            store = DistFeatureStore(group, LocalFeatureStore(part, ctx.rank), book)
            rng = np.random.default_rng(ctx.rank)
            if check_error and ctx.rank == 0:  # the owner (rank 1) raises; rank 0 must report it, naming rank 1
                from graphshard.distributed.groups.rpc import by_owner
                from graphshard.distributed.remote.feature import _serve_many

                by_owner(
                    group,
                    np.array([1]),
                    2,
                    None,
                    remote=_serve_many,
                    args=lambda pos: ("", [("paper", "no_such_feature", book.partid2nids(1, "paper")[:1], False)]),
                    what="feature",
                )
            for t, feats in g.node_feats.items():
                ids = torch.from_numpy(rng.permutation(g.num_nodes[t]))
                for name, full in feats.items():
                    got = store.lookup(t, name, ids).numpy()
                    assert np.array_equal(got, full[book.to_original(t, ids).numpy()]), (ctx.rank, t, name)
            for et, feats in g.edge_feats.items():
                ids = torch.from_numpy(rng.permutation(g.num_edges(et)))
                for name, full in feats.items():
                    got = store.lookup(et, name, ids).numpy()
                    assert np.array_equal(got, full[book.to_original_eids(et, ids).numpy()])
            _many_checks(g, book, store, rng)
            if sparse:  # only the non-zeros of remote CSR rows travel: far fewer bytes than their dense rows
                ids = torch.from_numpy(rng.permutation(60))
                csr = store.lookup_nonzeros("paper", "bow", ids)  # what a sparse batch holds, in the order asked
                assert np.array_equal(csr.dense(), g.node_feats["paper"]["bow"][book.to_original("paper", ids).numpy()])
                before = dict(store.stats)
                store.lookup("paper", "bow", torch.arange(60))
                remote = store.stats["remote_rows"] - before["remote_rows"]
                sent = store.stats["bytes_received"] - before["bytes_received"]
                assert remote > 0 and sent < 0.4 * remote * 50 * 4, (remote, sent)
            else:
                _pyg_checks(g, book, store)
                _overlay_checks(g, book, store, ctx.rank)
        except BaseException:
            graceful = False  # a graceful shutdown would wait for the other rank, still at its checks
            raise
        finally:
            shutdown_rpc(group, graceful)
    os.environ.pop("RANK", None)


def _many_checks(g, book, store, rng) -> None:
    """Every node and edge feature of every type read together: right rows, one request to the other rank."""
    import torch

    asks, want = [], []
    for t, feats in g.node_feats.items():
        ids = torch.from_numpy(rng.integers(0, g.num_nodes[t], 37))
        for name, full in feats.items():
            asks.append((t, name, ids))
            want.append(full[book.to_original(t, ids).numpy()])
    for et, feats in g.edge_feats.items():
        ids = torch.from_numpy(rng.integers(0, g.num_edges(et), 23))
        for name, full in feats.items():
            asks.append((et, name, ids))
            want.append(full[book.to_original_eids(et, ids).numpy()])
    before = store.group.channels.stats["requests"]
    got = store.lookup_many(asks)
    assert len(asks) > 3 and store.group.channels.stats["requests"] - before == 1, len(asks)  # one request
    for (t, name, _), rows, expected in zip(asks, got, want):
        assert np.array_equal(rows.numpy(), expected), (t, name)


@pytest.fixture
def config(tmp_path):
    partition_graph(small_hetero(), "h", 2, tmp_path, part_method="metis", num_hops=1)
    return str(tmp_path / "h.json")


def test_every_rank_reads_every_row(config):
    launch(_worker, 2, (config, False), timeout=60)


def test_remote_error_names_the_owner(config):
    with pytest.raises(DistError, match=r"rank 0 failed: .*request to rank1 failed: KeyError: .*no_such_feature"):
        launch(_worker, 2, (config, True), timeout=60)


def test_sparse_features_read_dense_and_travel_as_non_zeros(tmp_path):
    partition_graph(sparse_hetero(), "s", 2, tmp_path, part_method="metis", num_hops=1)
    launch(_worker, 2, (str(tmp_path / "s.json"), False, True), timeout=60)

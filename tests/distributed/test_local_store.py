"""LocalFeatureStore against the original graph's features, through PyG's FeatureStore API."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphshard import IDRangeError, load_partition, partition_graph
from graphshard.distributed.local_store import LocalFeatureStore
from tests.graphs import small_hetero


@pytest.fixture
def stores(tmp_path):
    g = small_hetero()
    partition_graph(g, "h", 2, tmp_path, part_method="metis")
    parts = [load_partition(tmp_path / "h.json", p) for p in range(2)]
    return g, parts, [LocalFeatureStore(parts[p], p) for p in range(2)]


def test_rows_by_global_ids_equal_original_features(stores):
    g, parts, fs = stores
    book = parts[0].partition_book
    for p in range(2):
        ids = book.partid2nids(p, "paper")
        got = fs[p].get_tensor("paper", "feat", index=ids)
        orig = book.to_original("paper", ids).numpy()
        assert np.array_equal(got.numpy(), g.node_feats["paper"]["feat"][orig])
        eids = book.partid2eids(p, ("paper", "cites", "paper"))
        w = fs[p].get_tensor(("paper", "cites", "paper"), "weight", index=eids)
        eorig = book.to_original_eids(("paper", "cites", "paper"), eids).numpy()
        assert np.array_equal(w.numpy(), g.edge_feats[("paper", "cites", "paper")]["weight"][eorig])
    # PyG's indexing syntax and attribute listing
    ids = book.partid2nids(1, "author")[:3]
    assert torch.equal(fs[1]["author", "emb", ids], fs[1].get_tensor("author", "emb", index=ids))
    assert {(a.group_name, a.attr_name) for a in fs[0].get_all_tensor_attrs()} == {
        ("paper", "feat"), ("paper", "label"), ("author", "emb"), (("paper", "cites", "paper"), "weight")}


def test_ownership_put_remove_size(stores):
    g, parts, fs = stores
    book = parts[0].partition_book
    foreign = book.partid2nids(1, "paper")[:1]
    with pytest.raises(IDRangeError, match="not owned by this partition"):
        fs[0].get_tensor("paper", "feat", index=foreign)
    mine = book.partid2nids(0, "paper")[:2]
    fs[0].put_tensor(torch.zeros(2, 5), "paper", "feat", index=mine)
    assert (fs[0].get_tensor("paper", "feat", index=mine) == 0).all()
    n0 = book.partid2nids(0, "author").numel()
    mine_all = book.partid2nids(0, "author")
    fs[0].put_tensor(torch.arange(n0 * 2.0).view(n0, 2), "author", "extra", index=mine_all.flip(0))
    assert torch.equal(fs[0].get_tensor("author", "extra", index=mine_all[-1:]), torch.tensor([[0.0, 1.0]]))
    assert fs[0].get_tensor_size("author", "extra") == (n0, 2)
    assert fs[0].remove_tensor("author", "extra", index=mine_all)  # PyG wants every field given
    assert fs[0].get_tensor("author", "extra", index=mine_all) is None  # PyG 2.8 returns None for a missing tensor


def test_graph_store_edges_are_original_edges(stores):
    from graphshard.distributed.local_store import LocalGraphStore
    g, parts, _ = stores
    book = parts[0].partition_book
    for p in range(2):
        gs = LocalGraphStore(parts[p])
        attrs = {a.edge_type: a for a in gs.get_all_edge_attrs()}
        assert set(attrs) == set(g.canonical_etypes)
        for et in g.canonical_etypes:
            src, dst = gs.get_edge_index(et, "coo")
            assert attrs[et].size == (g.num_nodes[et[0]], g.num_nodes[et[2]])
            osrc = book.to_original(et[0], src).numpy() if src.numel() else np.zeros(0, np.int64)
            odst = book.to_original(et[2], dst).numpy() if dst.numel() else np.zeros(0, np.int64)
            original = set(zip(g.edges[et][0].tolist(), g.edges[et][1].tolist()))
            assert set(zip(osrc.tolist(), odst.tolist())) <= original
            inner = book.nid2partid(dst, et[2]).numpy() == p if dst.numel() else np.zeros(0, bool)
            mine = {(int(a), int(b)) for a, b in zip(g.edges[et][0], g.edges[et][1])
                    if int(book.nid2partid(book.from_original(et[2], [b]), et[2])[0]) == p}
            assert set(zip(osrc[inner].tolist(), odst[inner].tolist())) == mine  # every in-edge of inner nodes
        with pytest.raises(Exception, match="only COO"):
            gs.get_edge_index(g.canonical_etypes[0], "csc")

"""LocalGraphStore through PyG's GraphStore API: PyG's own graph-store contract (test/data/test_graph_store.py)
checked against PyG's reference ``MyGraphStore`` holding the same edges, the partition's edges against the
original graph, and ``e_id`` through PyG's own NeighborLoader collation (no sampling library needed)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.data.graph_store import EdgeAttr, EdgeLayout
from torch_geometric.loader import NeighborLoader
from torch_geometric.sampler import NeighborSampler
from torch_geometric.sampler import SamplerOutput as PygOutput
from torch_geometric.testing import MyGraphStore

from graphshard import Graph, InputError
from graphshard.sampling import CSCGraph, sample_neighbors
from tests.distributed.pyg_expect import HOMO, check_edges, check_node_data, orig_edges, orig_nodes, own_edges, stores
from tests.graphs import small_hetero, small_homo

CITES = ("paper", "cites", "paper")


def test_pyg_graph_store_contract(tmp_path):
    _, _, gs = stores(small_hetero(), tmp_path, "h", 2, method="metis")
    ref = MyGraphStore()
    native = len(gs.get_all_edge_attrs())
    assert str(gs) == "LocalGraphStore()" and native == len(small_hetero().edges)
    coo = torch.tensor([0, 1]), torch.tensor([1, 2])
    csr = torch.tensor([0, 1, 2]), torch.tensor([1, 2])
    csc = torch.tensor([0, 1]), torch.tensor([0, 0, 1, 2])
    for store in (gs, ref):
        store["edge_type", "coo"] = coo
        store["edge_type", "csr"] = csr
        store["edge_type", "csc"] = csc
        for layout, pair in (("coo", coo), ("csr", csr), ("csc", csc)):
            assert all(torch.equal(a, b) for a, b in zip(store["edge_type", layout], pair))
        del store["edge_type", "coo"]
        with pytest.raises(KeyError):
            store["edge_type", "coo"]
        with pytest.raises(KeyError):
            store["edge_type_2", "coo"]
    assert len(gs.get_all_edge_attrs()) == native + 2 and len(ref.get_all_edge_attrs()) == 2
    # the partition's own edges are held as CSC; COO is a view of them on request (not listed), CSR is not held
    assert all(a.layout == EdgeLayout.CSC and a.is_sorted for a in gs.get_all_edge_attrs()[:native])
    row, colptr = gs[CITES, "csc"]
    assert torch.equal(gs[CITES, "coo"][0], row)
    assert torch.equal(gs[CITES, "coo"][1], torch.repeat_interleave(torch.arange(len(colptr) - 1), colptr.diff()))
    assert torch.equal(gs.edge_ids(CITES, "coo"), gs.edge_ids(CITES, "csc"))
    with pytest.raises(KeyError, match=r"no 'csr' edge index of edge type \('paper', 'cites', 'paper'\).*\['csc'\]"):
        gs[CITES, "csr"]
    with pytest.raises(KeyError, match="no edge type"):
        gs[("paper", "nope", "paper"), "csc"]


def test_conversions_match_the_reference_and_carry_edge_rows(tmp_path):
    g = small_hetero()
    book, fs, gs = stores(g, tmp_path, "h", 2, part_id=1, method="metis")
    ref = MyGraphStore()
    want = {}
    for et in g.canonical_etypes:
        s, d, e = own_edges(g, book, 1, et)  # from the original graph, not the store
        size = (book.partid2nids(1, et[0]).numel(), book.partid2nids(1, et[2]).numel())
        assert gs.get_all_edge_attrs()[g.canonical_etypes.index(et)].size == size
        ref.put_edge_index((torch.from_numpy(s), torch.from_numpy(d)), et, "coo", size=size)
        want[et] = (s, d, e, size)
    assert len(want[CITES][0]) > 0 and len(want[("author", "writes", "paper")][0]) > 0
    ours_coo, ref_coo = gs.coo(), ref.coo()
    for et, (_, _, e, _) in want.items():
        row, col, perm = ours_coo[0][et], ours_coo[1][et], ours_coo[2][et]
        key = lambda r, c: sorted(zip(r.tolist(), c.tolist()))  # noqa: E731
        assert key(row, col) == key(ref_coo[0][et], ref_coo[1][et])
        assert sorted(perm.tolist()) == sorted(e.tolist())  # perm: each edge's feature row
        check_edges(g, book, 1, et, row, col, perm)
        if et == CITES:  # and each perm entry addresses that edge's features
            want_w = g.edge_feats[CITES]["weight"][orig_edges(book, 1, CITES, perm)]
            assert np.array_equal(fs.get_tensor(et, "weight", index=perm).numpy(), want_w)
    for layout, mine, theirs in (("csr", gs.csr(), ref.csr()), ("csc", gs.csc(), ref.csc())):
        for et in want:
            ptr_ours, ptr_ref = (mine[0][et], theirs[0][et]) if layout == "csr" else (mine[1][et], theirs[1][et])
            idx_ours, idx_ref = (mine[1][et], theirs[1][et]) if layout == "csr" else (mine[0][et], theirs[0][et])
            assert torch.equal(ptr_ours, ptr_ref) and sorted(idx_ours.tolist()) == sorted(idx_ref.tolist())
            ptr = ptr_ours.numpy()
            other = np.repeat(np.arange(len(ptr) - 1), np.diff(ptr))
            pair = (other, idx_ours) if layout == "csr" else (idx_ours, other)
            check_edges(g, book, 1, et, *pair, mine[2][et])
    # PyG's store=True keeps the converted layout beside the native one, edge rows included
    key = EdgeAttr(CITES, EdgeLayout.CSR, size=want[CITES][3])
    with pytest.raises(KeyError):
        gs[key]
    out = gs.csr([CITES], store=True)
    assert torch.equal(gs[key][0], out[0][CITES]) and torch.equal(gs[key][1], out[1][CITES])
    assert {a.layout for a in gs.get_all_edge_attrs() if a.edge_type == CITES} == {EdgeLayout.CSC, EdgeLayout.CSR}
    assert torch.equal(gs.edge_ids(CITES, "csr"), out[2][CITES])
    assert torch.equal(gs.csr([CITES])[2][CITES], out[2][CITES])  # now served as stored, same rows


def test_single_partition_single_type_is_pyg_homogeneous_and_zero_copy(tmp_path):
    g = small_homo()
    book, fs, gs = stores(g, tmp_path, "s", 1)
    part_graph = gs._graph
    n = g.num_nodes["_N"]
    assert gs.get_all_edge_attrs() == [EdgeAttr(None, EdgeLayout.CSC, True, (n, n))]
    row, colptr, perm = gs.csc()
    assert row.dtype == colptr.dtype == perm.dtype == torch.int64  # as PyG takes them, however they are stored
    for got, stored in ((row, part_graph.indices), (colptr, part_graph.indptr), (perm, part_graph.edata["_ID"])):
        assert torch.equal(got, stored.long())  # one partition: the arrays as stored, the edge IDs the rows
        if stored.dtype == torch.int64:  # zero-copy where the partition stores int64 already
            assert got.data_ptr() == stored.data_ptr()
    for edge_type in (None, HOMO, "_N:_E:_N"):
        assert torch.equal(gs.get_edge_index(edge_type, "csc")[0], row)
    dst = np.repeat(np.arange(n), np.diff(colptr.numpy()))
    check_edges(g, book, 0, HOMO, row, dst, perm)
    assert len(row) == g.num_edges(HOMO)
    row2, col2, perm2 = gs.coo()  # PyG's homogeneous form: one tuple, not dicts
    assert torch.equal(row2, row) and torch.equal(col2, torch.from_numpy(dst)) and torch.equal(perm2, perm)


@pytest.mark.parametrize("num_parts", [2, 3])
def test_several_partitions_keep_to_their_own_rows(tmp_path, num_parts):
    g = small_homo()
    for p in range(num_parts):
        book, fs, gs = stores(g, tmp_path, "s", num_parts, part_id=p, num_hops=2)
        n = book.partid2nids(p).numel()
        assert gs.get_all_edge_attrs()[0].size == (n, n) == (fs.get_tensor_size(None, "x")[0],) * 2
        row, colptr, perm = gs.csc()
        assert len(colptr) == n + 1 and (row.numel() == 0 or int(row.max()) < n)
        s, d, e = own_edges(g, book, p, HOMO)
        got = sorted(zip(row.tolist(), np.repeat(np.arange(n), np.diff(colptr.numpy())).tolist(), perm.tolist()))
        assert got == sorted(zip(s.tolist(), d.tolist(), e.tolist()))  # every edge between own nodes, no other
        assert fs.get_tensor((None, None), "w", index=perm).shape == (len(perm),)  # every e_id has a feature row


@pytest.mark.filterwarnings("ignore:Using 'NeighborSampler' without a 'pyg-lib'")
def test_is_sorted_is_reported_truthfully_and_allows_temporal_sampling(tmp_path):
    base = small_homo()
    src, dst = base.edges[HOMO]
    feats = dict(base.node_feats["_N"], time=np.arange(240, dtype=np.int64)[::-1].copy())
    g = Graph.from_arrays(src, dst, 240, node_feats=feats)
    book, fs, gs = stores(g, tmp_path, "t", 1)
    # PyG's remote temporal sampler accepts only sorted edges (it raised on the old unsorted COO)
    sampler = NeighborSampler((fs, gs), [2, 2], time_attr="time")
    assert torch.equal(sampler.node_time, torch.from_numpy(feats["time"][orig_nodes(book, 0, "_N", torch.arange(240))]))
    order = torch.randperm(len(src))
    src_t, dst_t = torch.from_numpy(src), torch.from_numpy(dst)
    gs.put_edge_index((src_t[order], dst_t[order]), ("a", "r", "a"), "coo", is_sorted=True)  # claimed, not true
    by_dst = torch.from_numpy(np.argsort(dst, kind="stable"))
    gs.put_edge_index((src_t[by_dst], dst_t[by_dst]), ("b", "r", "b"), "coo", is_sorted=False)  # true, not claimed
    reported = {a.edge_type: a.is_sorted for a in gs.get_all_edge_attrs()}
    assert reported[("a", "r", "a")] is False and reported[("b", "r", "b")] is True and reported[None] is True


def _pyg_output(gs, seeds, fanouts, seed):
    """A sample drawn by graphshard's own kernel over the store's CSC, in PyG's sampler-output form."""
    row, colptr, _ = gs.csc()
    out = sample_neighbors(CSCGraph(colptr.numpy(), row.numpy()), seeds, fanouts, seed=seed)
    t = lambda a: torch.from_numpy(np.asarray(a))  # noqa: E731
    return PygOutput(
        t(out.node),
        t(out.row),
        t(out.col),
        t(out.edge),
        None,
        list(out.num_sampled_nodes),
        list(out.num_sampled_edges),
        metadata=(torch.arange(len(seeds)), None),
    )


@pytest.mark.filterwarnings("ignore:Using 'NeighborSampler' without a 'pyg-lib'")
@pytest.mark.parametrize("num_parts", [1, 2])
def test_pyg_neighbor_loader_collates_our_stores_with_edge_features(tmp_path, num_parts):
    """PyG's NeighborLoader (its collation, fed one sample) over our stores: a homogeneous ``Data`` with
    ``x``/``y``; ``e_id`` addresses the edge features (the issue: 4,022 of 4,022 rows were wrong)."""
    g = small_homo()
    w = g.edge_feats[HOMO]["w"]
    book, fs, gs = stores(g, tmp_path, "s", num_parts, part_id=num_parts - 1)
    n = book.partid2nids(num_parts - 1).numel()
    seeds = np.arange(0, n, 7)
    loader = NeighborLoader((fs, gs), num_neighbors=[3, 2], input_nodes=torch.from_numpy(seeds), batch_size=len(seeds))
    assert loader.node_sampler.is_hetero is False and loader.node_sampler.num_nodes == n
    data = loader.filter_fn(_pyg_output(gs, seeds, [3, 2], seed=5))
    assert isinstance(data, Data) and not isinstance(data, HeteroData)
    assert data.e_id.numel() > 20 and set(data.keys()) >= {"x", "y", "edge_index", "n_id", "e_id", "input_id"}
    check_node_data(g, book, num_parts - 1, "_N", data, data.n_id)
    check_edges(g, book, num_parts - 1, HOMO, data.n_id[data.edge_index[0]], data.n_id[data.edge_index[1]], data.e_id)
    e_orig = orig_edges(book, num_parts - 1, HOMO, data.e_id)
    assert np.array_equal(fs.get_tensor((None, None), "w", index=data.e_id).numpy(), w[e_orig])
    assert torch.equal(data.input_id, torch.arange(len(seeds)))


def test_puts_are_checked_and_change_this_object_only(tmp_path):
    g = small_hetero()
    book, _, gs = stores(g, tmp_path, "h", 2, part_id=0, method="metis")
    n_paper = book.partid2nids(0, "paper").numel()
    bad = [
        ((torch.zeros(2, 2), torch.zeros(2)), CITES, "coo", None, "must be two 1-D tensors"),
        ((torch.tensor([0.5]), torch.tensor([1.0])), "x", "coo", None, "must hold integers"),
        ((torch.tensor([0, 1]), torch.tensor([1])), "x", "coo", None, "differ in length"),
        ((torch.tensor([0, 2, 1]), torch.tensor([0, 0])), "x", "csr", None, "never decrease"),
        (
            (torch.tensor([0]), torch.tensor([n_paper])),
            CITES,
            "coo",
            None,
            rf"destination IDs must lie in \[0, {n_paper}\)",
        ),
        ((torch.tensor([0]), torch.tensor([0, 1])), CITES, "csc", None, rf"needs {n_paper + 1} entries"),
        ((torch.tensor([0]), torch.tensor([0])), CITES, "coo", (5, 5), "is not the partition's own node counts"),
    ]
    for pair, et, layout, size, match in bad:
        with pytest.raises(InputError, match=match):
            gs.put_edge_index(pair, et, layout, size=size)
    assert len(gs.get_all_edge_attrs()) == len(g.edges)  # nothing was put
    # a COO put over a stored type is served instead of the view; removing it brings the view back
    mine = torch.tensor([1, 0]), torch.tensor([0, 1])
    gs.put_edge_index(mine, CITES, "coo")
    assert all(torch.equal(a, b) for a, b in zip(gs[CITES, "coo"], mine)) and gs.edge_ids(CITES, "coo") is None
    del gs[CITES, "coo"]
    row, colptr = gs[CITES, "csc"]
    assert torch.equal(gs[CITES, "coo"][0], row) and len(gs[CITES, "coo"][1]) == len(row)
    assert len(stores(g, tmp_path, "h", 2, part_id=0)[2].get_all_edge_attrs()) == len(g.edges)

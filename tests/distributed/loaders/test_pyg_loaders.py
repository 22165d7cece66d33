"""PyG's own NeighborLoader / LinkNeighborLoader over LocalFeatureStore + LocalGraphStore, every batch checked
against the original graph: node data, edges, ``e_id`` → edge features, ``input_id``. PyG samples with
pyg-lib or torch-sparse; neither is a graphshard dependency, so these tests skip without them."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch_geometric.typing as pyg_typing
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader

from graphshard import Graph
from graphshard.datasets import load_dataset
from tests.distributed.pyg_expect import HOMO, check_edges, check_node_data, orig_edges, own_edges, stores
from tests.graphs import shared_dataset, small_hetero, small_homo

pytestmark = [
    pytest.mark.skipif(
        not (pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE),
        reason="PyG's neighbour samplers need pyg-lib or torch-sparse (not graphshard dependencies)",
    ),
    pytest.mark.filterwarnings("ignore:Using 'NeighborSampler' without a 'pyg-lib'"),
]
CITES = ("paper", "cites", "paper")


def _every_type_featured(g: Graph) -> Graph:
    """``g`` with a ``feat`` for its featureless node types: PyG learns node types from the feature store,
    and its torch-sparse sampler fails on an edge type whose end has none (PyG's reference stores too)."""
    feats = {t: dict(g.node_feats.get(t, {})) for t in g.ntypes}
    for t, n in g.num_nodes.items():
        feats[t].setdefault("feat", np.arange(n, dtype=np.float32)[:, None] * np.ones(2, np.float32))
    return Graph(g.num_nodes, g.edges, feats, g.edge_feats)


def _check_edge_feats(g, book, p, fs, et, e_id, group=None) -> None:
    for name, full in g.edge_feats.get(et, {}).items():
        got = fs.get_tensor(group if group is not None else et, name, index=e_id)
        assert np.array_equal(got.numpy(), full[orig_edges(book, p, et, e_id)]), (et, name)


def _check_homo_batch(g, book, p, fs, data, n) -> None:
    assert isinstance(data, Data) and not isinstance(data, HeteroData)
    assert int(data.n_id.max()) < n  # every node PyG reached has feature rows in this partition
    check_node_data(g, book, p, "_N", data, data.n_id)
    check_edges(g, book, p, HOMO, data.n_id[data.edge_index[0]], data.n_id[data.edge_index[1]], data.e_id)
    _check_edge_feats(g, book, p, fs, HOMO, data.e_id, group=(None, None))


@pytest.mark.parametrize("num_parts", [1, 2])
def test_neighbor_loader_homogeneous(tmp_path, num_parts):
    g = small_homo()
    p = num_parts - 1
    book, fs, gs = stores(g, tmp_path, "s", num_parts, part_id=p, num_hops=2)
    n = book.partid2nids(p).numel()
    seeds = torch.randperm(n)[: n // 2]
    loader = NeighborLoader((fs, gs), num_neighbors=[4, 3], input_nodes=seeds, batch_size=16, shuffle=True)
    seen, edges = [], 0
    for data in loader:
        _check_homo_batch(g, book, p, fs, data, n)
        assert torch.equal(seeds[data.input_id], data.n_id[: data.batch_size])  # PyG's input_id: index into input_nodes
        seen += data.input_id.tolist()
        edges += data.e_id.numel()
    assert sorted(seen) == list(range(len(seeds))) and edges > len(seeds)


@pytest.mark.parametrize("neg", [None, "binary"])
def test_link_neighbor_loader_homogeneous(tmp_path, neg):
    g = small_homo()
    book, fs, gs = stores(g, tmp_path, "s", 2, part_id=1)
    n = book.partid2nids(1).numel()
    s, d, _ = own_edges(g, book, 1, HOMO)
    pairs = torch.from_numpy(np.stack([s, d]))
    loader = LinkNeighborLoader(
        (fs, gs), num_neighbors=[3, 2], edge_label_index=(None, pairs), batch_size=32, neg_sampling=neg
    )
    seen = []
    for data in loader:
        _check_homo_batch(g, book, 1, fs, data, n)
        k = data.input_id.numel()
        assert torch.equal(data.n_id[data.edge_label_index[:, :k]], pairs[:, data.input_id])
        if neg == "binary":
            assert data.edge_label[:k].eq(1).all() and data.edge_label[k:].eq(0).all() and len(data.edge_label) == 2 * k
        seen += data.input_id.tolist()
    assert sorted(seen) == list(range(pairs.shape[1]))


@pytest.mark.parametrize("num_parts", [1, 2])
def test_neighbor_loader_heterogeneous(tmp_path, num_parts):
    g = _every_type_featured(small_hetero())
    p = num_parts - 1
    book, fs, gs = stores(g, tmp_path, "h", num_parts, part_id=p, method="metis")
    seeds = torch.arange(book.partid2nids(p, "paper").numel())
    loader = NeighborLoader((fs, gs), num_neighbors=[3, 3], input_nodes=("paper", seeds), batch_size=8)
    cites = 0
    for data in loader:
        paper = data["paper"]
        assert isinstance(data, HeteroData) and torch.equal(seeds[paper.input_id], paper.n_id[: paper.batch_size])
        for t in data.node_types:
            check_node_data(g, book, p, t, data[t], data[t].n_id)
        for et in data.edge_types:
            if "e_id" not in data[et]:
                continue
            src, dst = data[et[0]].n_id, data[et[2]].n_id
            check_edges(g, book, p, et, src[data[et].edge_index[0]], dst[data[et].edge_index[1]], data[et].e_id)
            _check_edge_feats(g, book, p, fs, et, data[et].e_id)
            cites += data[et].e_id.numel() if et == CITES else 0
    assert cites > 0


def test_link_neighbor_loader_heterogeneous(tmp_path):
    g = _every_type_featured(small_hetero())
    book, fs, gs = stores(g, tmp_path, "h", 1)
    s, d, _ = own_edges(g, book, 0, CITES)
    pairs = torch.from_numpy(np.stack([s, d]))
    loader = LinkNeighborLoader(
        (fs, gs), num_neighbors=[2, 2], edge_label_index=(CITES, pairs), batch_size=16, neg_sampling="binary"
    )
    for data in loader:
        k = data[CITES].input_id.numel()
        assert torch.equal(data["paper"].n_id[data[CITES].edge_label_index[:, :k]], pairs[:, data[CITES].input_id])
        check_node_data(g, book, 0, "paper", data["paper"], data["paper"].n_id)
        src = data["paper"].n_id
        check_edges(g, book, 0, CITES, src[data[CITES].edge_index[0]], src[data[CITES].edge_index[1]], data[CITES].e_id)
        _check_edge_feats(g, book, 0, fs, CITES, data[CITES].e_id)


def test_cora_single_partition(tmp_path):
    ds = load_dataset(shared_dataset("cora"))
    g = ds.graph
    src, dst = g.edges[HOMO]
    g = Graph.from_arrays(
        src,
        dst,
        g.num_nodes["_N"],
        node_feats=g.node_feats["_N"],
        edge_feats={"w": np.random.default_rng(0).random(len(src)).astype(np.float32)},
    )
    book, fs, gs = stores(g, tmp_path, "cora", 1)
    train = torch.from_numpy(np.flatnonzero(g.node_feats["_N"]["train_mask"]))
    loader = NeighborLoader(
        (fs, gs), num_neighbors=[10, 10], input_nodes=book.from_original("_N", train), batch_size=35
    )
    for data in loader:
        _check_homo_batch(g, book, 0, fs, data, g.num_nodes["_N"])
        assert data.x.shape[1] == 1433 and data.y.numpy().dtype == g.node_feats["_N"]["label"].dtype


def test_dblp_single_partition(tmp_path):
    ds = load_dataset(shared_dataset("dblp_hetero"))
    g0 = ds.graph
    rng = np.random.default_rng(1)
    node_feats = {t: dict(f) for t, f in g0.node_feats.items()}
    node_feats["paper"]["feat"] = node_feats["paper"]["feat"][:, :16].copy()  # keep the partition small
    edge_feats = {et: {"w": rng.random(len(s)).astype(np.float32)} for et, (s, _) in g0.edges.items()}
    g = _every_type_featured(Graph(g0.num_nodes, g0.edges, node_feats, edge_feats))
    book, fs, gs = stores(g, tmp_path, "dblp", 1)
    authors = book.from_original("author", torch.arange(0, g.num_nodes["author"], 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loader = NeighborLoader((fs, gs), num_neighbors=[5, 5], input_nodes=("author", authors), batch_size=256)
        written = 0
        for data in loader:
            for t in data.node_types:
                check_node_data(g, book, 0, t, data[t], data[t].n_id)
            for et in data.edge_types:
                if "e_id" in data[et] and data[et].e_id.numel():
                    src, dst = data[et[0]].n_id, data[et[2]].n_id
                    check_edges(g, book, 0, et, src[data[et].edge_index[0]], dst[data[et].edge_index[1]], data[et].e_id)
                    _check_edge_feats(g, book, 0, fs, et, data[et].e_id)
                    written += data[et].e_id.numel()
    assert written > 2500  # paper -> author edges, each checked with its edge features

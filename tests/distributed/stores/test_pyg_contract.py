"""PyG's store contract (the behaviours of PyG's test/data/test_feature_store.py and test_graph_store.py,
written anew for our stores' construction), run on graphshard's stores and on PyG's reference stores
(``MyFeatureStore``/``MyGraphStore``): every behaviour is a labelled check, the reference must pass them all,
and ours may differ only where docs/pyg-stores.md says so. Then PyG's documented write patterns: a ``time``
attribute for temporal sampling, and a placeholder feature that lets PyG's heterogeneous NeighborLoader
run on a graph with a featureless node type (small_hetero always, DBLP when the shared dataset is there)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from torch_geometric.data import HeteroData, TensorAttr
from torch_geometric.data.feature_store import AttrView, _FieldStatus
from torch_geometric.data.graph_store import EdgeAttr, EdgeLayout
from torch_geometric.loader import NeighborLoader
from torch_geometric.sampler import HeteroSamplerOutput, NeighborSampler, SamplerOutput
from torch_geometric.testing import MyFeatureStore, MyGraphStore, get_random_edge_index
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csc_tensor, to_torch_csr_tensor

from graphshard import Graph, InputError, load_partition, partition_graph
from graphshard.datasets import load_dataset
from graphshard.distributed.stores.local import LocalFeatureStore, LocalGraphStore
from tests.distributed.pyg_expect import HOMO, check_edges, check_node_data, orig_edges, orig_nodes, stores
from tests.graphs import shared_dataset, small_hetero, small_homo

PUB = ("paper", "published_in", "venue")
# PyG behaviours our stores do not share, each with its reason in docs/pyg-stores.md ("Differences")
DIFFERENCES: dict[str, set[str]] = {"feature": set(), "feature_no_group": set(), "graph": set(), "conversion": set()}
NOISE = pytest.mark.filterwarnings("ignore:Using 'NeighborSampler' without a 'pyg-lib'")


class Checks:
    """Runs labelled checks, recording the failed ones (with their error) instead of stopping at the first."""

    def __init__(self) -> None:
        self.passed: list[str] = []
        self.failed: dict[str, str] = {}

    def __call__(self, label: str, check: Callable[[], Any]) -> None:
        try:
            ok = check()
        except Exception as err:  # a check that raised is a failed behaviour, reported with its error
            self.failed[label] = f"{type(err).__name__}: {err}"
            return
        if ok is False:
            self.failed[label] = "returned False"
        else:
            self.passed.append(label)

    def raises(self, label: str, error: type, action: Callable[[], Any]) -> None:
        def check() -> bool:
            try:
                action()
            except error:
                return True
            return False

        self(label, check)


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a, b)


@pytest.fixture(scope="module")
def hetero_part(tmp_path_factory):
    path = tmp_path_factory.mktemp("hc")
    g = small_hetero()
    partition_graph(g, "h", 1, path, part_method="random")
    return g, load_partition(path / "h.json", 0)


@pytest.fixture(scope="module")
def homo_part(tmp_path_factory):
    path = tmp_path_factory.mktemp("sc")
    g = small_homo()
    partition_graph(g, "s", 1, path, part_method="random")
    return g, load_partition(path / "s.json", 0)


# -- PyG's feature-store contract ------------------------------------------------------------------------
def feature_contract(store, group: str, attr_name: str, n: int) -> Checks:
    """PyG's feature-store behaviours on ``group``/``attr_name`` with a tensor of ``n`` rows."""
    c = Checks()
    tensor = torch.arange(n, dtype=torch.float32)[:, None].repeat(1, 3)
    index = torch.arange(n)
    attr = TensorAttr(group, attr_name, index)
    c("TensorAttr.update", lambda: TensorAttr(group).update(attr) == attr)
    c("put returns True", lambda: store.put_tensor(tensor, attr) is True)
    c("get after put", lambda: _equal(store.get_tensor(attr), tensor))
    c(
        "get rows [0, 2]",
        lambda: _equal(store.get_tensor(group, attr_name, index=torch.tensor([0, 2])), tensor[torch.tensor([0, 2])]),
    )
    c("update returns True", lambda: store.update_tensor(tensor + 1, attr) is True)
    c("get after update", lambda: _equal(store.get_tensor(attr), tensor + 1))
    c("remove", lambda: store.remove_tensor(attr))
    c.raises("get after remove: KeyError", KeyError, lambda: store.get_tensor(attr))
    view = store.view(group_name=group)
    view.attr_name = attr_name
    view["index"] = index
    c("view != other object", lambda: view != "not a 'AttrView' object")
    c("view == AttrView", lambda: view == AttrView(store, TensorAttr(group, attr_name, index)))
    c(
        "str(view)",
        lambda: (
            str(view) == f"AttrView(store={type(store).__name__}(), attr=TensorAttr(group_name="
            f"{group!r}, attr_name={attr_name!r}, index={index!r}))"
        ),
    )
    c("setitem", lambda: store.__setitem__((group, attr_name, index), tensor))
    c("store[g, a, index]", lambda: _equal(store[group, attr_name, index], tensor))
    c("store[g, a, None]", lambda: _equal(store[group, attr_name, None], tensor))
    c("store[g, a, :]", lambda: _equal(store[group, attr_name, :], tensor))
    c("store[g][a][:]", lambda: _equal(store[group][attr_name][:], tensor))
    c("store[g].a[:]", lambda: _equal(getattr(store[group], attr_name)[:], tensor))
    c("store.view().g.a[:]", lambda: _equal(getattr(getattr(store.view(), group), attr_name)[:], tensor))
    c.raises(
        "view with every field set: AttributeError",
        AttributeError,
        lambda: getattr(getattr(store.view(group_name=group, index=None), attr_name), group),
    )
    c("store[g] is a view", lambda: store[group] == store.view(TensorAttr(group_name=group)))
    c(
        "store[g].a is a view",
        lambda: getattr(store[group], attr_name) == store.view(TensorAttr(group_name=group, attr_name=attr_name)),
    )
    c("setitem with attr_name None", lambda: store.__setitem__((group, None, None), tensor))
    c("isinstance AttrView", lambda: isinstance(store[group], AttrView))
    c("store[g]() reads attr_name None", lambda: _equal(store[group](), tensor))
    c("del store[g, a, index]", lambda: store.__delitem__((group, attr_name, index)))
    c.raises("get after del: KeyError", KeyError, lambda: store[group, attr_name, index])
    c("del store[g]", lambda: store.__delitem__(group))
    c.raises("store[g]() after del: KeyError", KeyError, lambda: store[group]())
    return c


@pytest.mark.parametrize(
    "group,attr_name",
    [("A", "feat"), ("venue", "x"), ("paper", "x")],
    ids=["new-group", "featureless-type", "stored-tensor"],
)
def test_feature_store_contract(hetero_part, group, attr_name):
    """A group the graph lacks (PyG's own case), a node type without features, and a stored tensor
    replaced in memory: every behaviour of PyG's reference, none of them touching the files."""
    g, part = hetero_part
    n = g.num_nodes.get(group, 3)
    ours, ref = (
        feature_contract(LocalFeatureStore(part, 0), group, attr_name, n),
        feature_contract(MyFeatureStore(), group, attr_name, n),
    )
    assert not ref.failed and len(ref.passed) == 28
    assert set(ours.failed) == DIFFERENCES["feature"], ours.failed
    # the stored tensors of another store object of the same partition are as in the original graph
    other = LocalFeatureStore(part, 0)
    book = part.partition_book
    want = g.node_feats["paper"]["feat"][orig_nodes(book, 0, "paper", torch.arange(g.num_nodes["paper"]))]
    assert np.array_equal(other["paper", "x", None].numpy(), want)


@dataclass
class _NoGroupAttr(TensorAttr):
    """A TensorAttr addressed by ``(attr_name, index)`` only: group ``None`` (PyG's customisation example)."""

    def __init__(self, attr_name=_FieldStatus.UNSET, index=_FieldStatus.UNSET):
        super().__init__(None, attr_name, index)


class _NoGroupRef(MyFeatureStore):
    def __init__(self) -> None:
        super().__init__()
        self._tensor_attr_cls = _NoGroupAttr


class _NoGroupLocal(LocalFeatureStore):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._tensor_attr_cls = _NoGroupAttr


def feature_no_group_contract(store, n: int) -> Checks:
    c = Checks()
    tensor = torch.arange(n, dtype=torch.float32)[:, None].repeat(1, 3)
    index = torch.arange(n)
    c("setitem (attr, index)", lambda: store.__setitem__(("feat", index), tensor))
    c("store[a] is a view", lambda: isinstance(store["feat"], AttrView))
    c("store[a, index]", lambda: _equal(store["feat", index], tensor))
    c("store[a][index]", lambda: _equal(store["feat"][index], tensor))
    c("store[a][:]", lambda: _equal(store["feat"][:], tensor))
    c("store[a, :]", lambda: _equal(store["feat", :], tensor))
    return c


def test_feature_store_contract_without_group_names(homo_part):
    """PyG's custom TensorAttr without a group, on a single-type graph (group None: its nodes). A put
    into a type of the graph needs one row per node of it (PyG's own test puts 3 rows: see the docs)."""
    g, part = homo_part
    n = g.num_nodes["_N"]
    ours, ref = feature_no_group_contract(_NoGroupLocal(part, 0), n), feature_no_group_contract(_NoGroupRef(), n)
    assert not ref.failed and len(ref.passed) == 6
    assert set(ours.failed) == DIFFERENCES["feature_no_group"], ours.failed
    with pytest.raises(InputError, match=r"None/'emb': a new tensor needs all 240 rows of group '_N'"):
        _NoGroupLocal(part, 0)["emb", torch.arange(3)] = torch.zeros(3, 3)  # PyG's 3 rows: too few here
    with pytest.raises(InputError, match=r"None/'emb': the tensor has 3 rows.*of the group's 240 rows"):
        _NoGroupLocal(part, 0)["emb", None] = torch.zeros(3, 3)


# -- PyG's graph-store contract --------------------------------------------------------------------------
def graph_contract(store) -> Checks:
    c = Checks()
    before = len(store.get_all_edge_attrs())  # ours hold the partition's edge types already
    coo = torch.tensor([0, 1]), torch.tensor([1, 2])
    csr = torch.tensor([0, 1, 2]), torch.tensor([1, 2])
    csc = torch.tensor([0, 1]), torch.tensor([0, 0, 1, 2])
    c("str", lambda: str(store) == f"{type(store).__name__}()")
    for layout, pair in (("coo", coo), ("csr", csr), ("csc", csc)):
        c(f"put {layout}", lambda: store.__setitem__(("edge_type", layout), pair))
    for layout, pair in (("coo", coo), ("csr", csr), ("csc", csc)):
        for i in (0, 1):
            c(f"get {layout}[{i}]", lambda: _equal(store["edge_type", layout][i], pair[i]))
    c("three attrs more", lambda: len(store.get_all_edge_attrs()) == before + 3)
    c("del coo", lambda: store.__delitem__(("edge_type", "coo")))
    c.raises("get after del: KeyError", KeyError, lambda: store["edge_type", "coo"])
    c.raises("unknown edge type: KeyError", KeyError, lambda: store["edge_type_2", "coo"])
    return c


def test_graph_store_contract(hetero_part):
    _, part = hetero_part
    ours, ref = graph_contract(LocalGraphStore(part)), graph_contract(MyGraphStore())
    assert not ref.failed and len(ref.passed) == 14
    assert set(ours.failed) == DIFFERENCES["graph"], ours.failed


def conversion_contract(store) -> Checks:
    c = Checks()
    torch.manual_seed(12345)
    edge_index = get_random_edge_index(100, 100, 300)
    adj = to_torch_coo_tensor(edge_index, size=(100, 100))
    coo = adj.indices()[0], adj.indices()[1]
    adj = to_torch_csr_tensor(edge_index, size=(100, 100))
    csr = adj.crow_indices(), adj.col_indices()
    adj = to_torch_csc_tensor(edge_index, size=(100, 100))
    csc = adj.row_indices(), adj.ccol_indices()
    put = [("v", "1", "v"), ("v", "2", "v"), ("v", "3", "v")]
    for et, layout, pair in zip(put, ("coo", "csr", "csc"), (coo, csr, csc)):
        c(f"put {layout}", lambda: store.put_edge_index(pair, et, layout, size=(100, 100)))

    def mine(out: tuple) -> list[tuple]:  # the put types' (row, col, perm), as PyG's dicts hold them
        return [(out[0][et], out[1][et], out[2][et]) for et in put]

    srt = lambda t: t.sort()[0]  # noqa: E731
    for layout in ("coo", "csr", "csc"):
        out = getattr(store, layout)()
        c(
            f"{layout}(): one entry per edge type",
            lambda: len(out[0]) == len(out[1]) == len(out[2]) == len({a.edge_type for a in store.get_all_edge_attrs()}),
        )
        for et, (row, col, perm) in zip(put, mine(out)):
            if layout == "coo":
                c(
                    f"coo() {et}",
                    lambda: _equal(srt(row), srt(coo[0])) and _equal(srt(col), srt(coo[1])) and perm is None,
                )
            elif layout == "csr":
                c(f"csr() {et}", lambda: _equal(row, csr[0]) and _equal(srt(col), srt(csr[1])))
            else:
                c(f"csc() {et}", lambda: _equal(srt(row), srt(csc[0])) and _equal(col, csc[1]))
    c(
        "coo(edge_types)",
        lambda: (
            _equal(list(store.coo([put[0]])[0].values())[0], coo[0])
            and _equal(list(store.coo([put[0]])[1].values())[0], coo[1])
        ),
    )
    key = EdgeAttr(edge_type=put[0], layout=EdgeLayout.CSR, is_sorted=False, size=(100, 100))
    c.raises("csr not stored yet: KeyError", KeyError, lambda: store[key])
    c("csr(store=True)", lambda: _equal(list(store.csr([put[0]], store=True)[0].values())[0], csr[0]))
    c("stored csr", lambda: _equal(store[key][0], csr[0]) and _equal(srt(store[key][1]), srt(csr[1])))
    return c


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta", "ignore:Sparse invariant checks")
def test_graph_store_conversion_contract(hetero_part):
    _, part = hetero_part
    ours, ref = conversion_contract(LocalGraphStore(part)), conversion_contract(MyGraphStore())
    assert not ref.failed and len(ref.passed) == 19
    assert set(ours.failed) == DIFFERENCES["conversion"], ours.failed


# -- the COO view ----------------------------------------------------------------------------------------
def test_coo_view_is_pygs_conversion_of_the_stored_csc_with_edge_rows(hetero_part):
    g, part = hetero_part
    book, gs, fs = part.partition_book, LocalGraphStore(part), LocalFeatureStore(part, 0)
    cites = ("paper", "cites", "paper")
    for et in (cites, ("author", "writes", "paper"), PUB):
        ref = MyGraphStore()
        attr = gs.get_all_edge_attrs()[g.canonical_etypes.index(et)]
        ref.put_edge_index(gs[et, "csc"], attr)  # PyG's reference converts the same CSC
        want_row, want_col, _ = ref.coo([et])
        row, col = gs.get_edge_index(et, "coo")
        assert _equal(row, want_row[et]) and _equal(col, want_col[et]) and len(row) == g.num_edges(et)
        assert bool((col[1:] >= col[:-1]).all())  # sorted by destination, the CSC's order
        e_id = gs.edge_ids(et, "coo")
        check_edges(g, book, 0, et, row, col, e_id)  # edge i joins row[i] -> col[i] and is edge row e_id[i]
        out = gs.coo([et])
        assert _equal(out[0][et], row) and _equal(out[1][et], col) and _equal(out[2][et], e_id)
    e_id = gs.edge_ids(cites, "coo")
    want = g.edge_feats[cites]["weight"][orig_edges(book, 0, cites, e_id)]
    assert np.array_equal(fs[cites, "weight", e_id].numpy(), want)
    assert EdgeLayout.COO not in {a.layout for a in gs.get_all_edge_attrs()}  # a view, not a held layout
    del gs[cites, "csc"]  # the stored CSC hidden from this object: its view too
    with pytest.raises(KeyError):
        gs[cites, "coo"]
    assert len(LocalGraphStore(part)[cites, "coo"][0]) == g.num_edges(cites)  # another object still has them


# -- PyG's write patterns --------------------------------------------------------------------------------
@NOISE
def test_time_attribute_put_for_temporal_sampling(homo_part):
    g, part = homo_part
    fs, gs = LocalFeatureStore(part, 0), LocalGraphStore(part)
    with pytest.raises(ValueError, match="did not find any temporal data"):
        NeighborSampler((fs, gs), [2, 2], time_attr="time")
    time = torch.from_numpy(np.random.default_rng(0).integers(0, 100, g.num_nodes["_N"]))
    fs[None, "time", None] = time
    sampler = NeighborSampler((fs, gs), [2, 2], time_attr="time")
    assert _equal(sampler.node_time, time) and sampler.num_nodes == g.num_nodes["_N"]


class _OneHopSampler(NeighborSampler):
    """PyG's NeighborSampler (its set-up from our stores) drawing one hop with torch alone, for machines
    without pyg-lib/torch-sparse. Like pyg-lib, it needs every end of every edge type among the node types
    PyG learnt from the feature store (``KeyError`` naming the first missing one). Seeds' in-edges from
    other node types only, one edge type per source type (enough for the graphs below)."""

    def _sample(self, seed: dict, seed_time: Any = None, **kwargs: Any) -> HeteroSamplerOutput:
        for et in self.edge_types:
            for end in (et[0], et[2]):
                if end not in self.node_types:
                    raise KeyError(end)
        ((t, seeds),) = seed.items()
        fanout = self.fanout
        node, row, col, edge = {nt: torch.zeros(0, dtype=torch.long) for nt in self.node_types}, {}, {}, {}
        node[t] = seeds
        for et in self.edge_types:
            if et[2] != t or et[0] == t:
                continue
            rel = self.to_rel_type[et]
            pos, owner = _draw(self.colptr_dict[rel], seeds, fanout)
            node[et[0]], row[et] = torch.unique(self.row_dict[rel][pos], return_inverse=True)
            col[et], edge[et] = owner, pos  # CSC positions: PyG's loader maps them to e_id through perm
        return HeteroSamplerOutput(
            node,
            row,
            col,
            edge,
            batch=None,
            num_sampled_nodes={k: [len(v)] for k, v in node.items()},
            num_sampled_edges={k: [len(v)] for k, v in row.items()},
            metadata=(torch.arange(len(seeds)), None),
        )


def _draw(colptr: torch.Tensor, seeds: torch.Tensor, fanout: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Up to ``fanout`` in-edges of each seed, drawn at random: their CSC positions and their seed's index."""
    start, deg = colptr[seeds], colptr[seeds + 1] - colptr[seeds]
    owner = torch.repeat_interleave(torch.arange(len(seeds)), deg)
    first = torch.cumsum(deg, 0) - deg
    pos = start[owner] + torch.arange(len(owner)) - first[owner]
    order = torch.argsort(owner + torch.rand(len(owner), generator=torch.Generator().manual_seed(0)))
    keep = order[(torch.arange(len(owner)) - first[owner[order]]) < fanout]
    return pos[keep], owner[keep]


def _hetero_loader(fs, gs, seed_type: str, seeds: torch.Tensor, fanout: int, batch_size: int) -> NeighborLoader:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sampler = _OneHopSampler((fs, gs), [fanout])
    sampler.fanout = fanout
    return NeighborLoader(
        (fs, gs),
        num_neighbors=[fanout],
        input_nodes=(seed_type, seeds),
        batch_size=batch_size,
        neighbor_sampler=sampler,
    )


def _check_batch(g, book, data: HeteroData, et: tuple, placeholder: str, values: torch.Tensor) -> int:
    """A batch of seeds of ``et``'s destination type: node data, edges and edge rows as in the original
    graph, the placeholder's rows as put."""
    assert isinstance(data, HeteroData) and placeholder in data.node_types
    assert _equal(data[placeholder].x, values[data[placeholder].n_id])
    for t in data.node_types:
        if t != placeholder:
            check_node_data(g, book, 0, t, data[t], data[t].n_id)
    src, dst = data[et[0]].n_id, data[et[2]].n_id
    check_edges(g, book, 0, et, src[data[et].edge_index[0]], dst[data[et].edge_index[1]], data[et].e_id)
    return int(data[et].e_id.numel())


def test_placeholder_feature_lets_pygs_hetero_loader_run(hetero_part):
    """small_hetero's 'venue' and 'ghost' have no features: PyG does not learn them as node types and its
    sampler stops (pyg-lib's KeyError); a placeholder put for each (in memory) and PyG's loader runs."""
    g, part = hetero_part
    book, fs, gs = part.partition_book, LocalFeatureStore(part, 0), LocalGraphStore(part)
    seeds = torch.arange(g.num_nodes["venue"])
    with pytest.raises(KeyError, match="venue"):
        next(iter(_hetero_loader(fs, gs, "venue", seeds, 4, 2)))
    values = torch.arange(3.0)[:, None] * 10
    fs.put_tensor(values, "venue", "x", index=None)
    fs.put_tensor(torch.zeros(0, 1), "ghost", "x", index=None)
    loader = _hetero_loader(fs, gs, "venue", seeds, 4, 2)
    edges = sum(_check_batch(g, book, data, PUB, "venue", values) for data in loader)
    assert edges == 12  # 3 venues, 4 papers each (every venue has more)


def test_placeholder_feature_dblp(tmp_path):
    """PyG's heterogeneous NeighborLoader over DBLP (the shared dataset) after a placeholder feature for
    'conference', which has none: authors' papers, with the papers' stored CSR features read dense."""
    ds = load_dataset(shared_dataset("dblp_hetero"))
    g0 = ds.graph
    book, fs, gs = stores(Graph(g0.num_nodes, g0.edges, g0.node_feats, {}), tmp_path, "dblp", 1)
    n_conf = g0.num_nodes["conference"]
    authors = book.from_original("author", torch.arange(0, 64))
    writes = ("paper", "written_by", "author")
    with pytest.raises(KeyError, match="conference"):
        next(iter(_hetero_loader(fs, gs, "author", authors, 3, 32)))
    fs.put_tensor(torch.eye(n_conf), "conference", "x", index=None)  # one-hot, as HeCo does
    edges = 0
    for data in _hetero_loader(fs, gs, "author", authors, 3, 32):
        edges += _check_batch(g0, book, data, writes, "conference", torch.eye(n_conf))
        assert data["paper"].x.shape[1] == 4231 and data["conference"].x.shape == (0, n_conf)
    assert edges > 64


def test_homogeneous_loader_collates_a_put_attribute(homo_part):
    """A homogeneous store: a tensor put for group None is gathered by PyG's collation like stored data."""
    g, part = homo_part
    book, fs, gs = part.partition_book, LocalFeatureStore(part, 0), LocalGraphStore(part)
    score = torch.rand(g.num_nodes["_N"])
    fs[None, "score", None] = score
    fs[(None, None), "w2", None] = torch.zeros(g.num_edges(HOMO))  # edge data: held, not listed (PyG's rule)
    assert (None, "score") in {(a.group_name, a.attr_name) for a in fs.get_all_tensor_attrs()}
    assert all(a.group_name is None for a in fs.get_all_tensor_attrs())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loader = NeighborLoader((fs, gs), num_neighbors=[2], input_nodes=torch.arange(10), batch_size=10)
    row, colptr, perm = gs.csc()
    pos, owner = _draw(colptr, torch.arange(10), 2)
    nodes, inv = torch.unique(torch.cat([torch.arange(10), row[pos]]), return_inverse=True)
    data = loader.filter_fn(SamplerOutput(nodes, inv[10:], inv[owner], pos, metadata=(torch.arange(10), None)))
    assert _equal(data.score, score[data.n_id]) and "w2" not in data
    check_node_data(g, book, 0, "_N", data, data.n_id)


# -- PyG's types at the store boundary ---------------------------------------------------------------
def test_edge_indices_reach_pyg_as_int64(tmp_path):
    """Compact partitions store int32; every edge index PyG reads back is int64 (its samplers and ``perm``
    indexing want it), the stored CSC, its COO view, PyG's CSR conversion and what a put gave as int32."""
    _, _, gs = stores(small_hetero(), tmp_path, "g", 2)
    et = ("paper", "cites", "paper")
    for layout in ("csc", "coo"):
        assert [t.dtype for t in gs.get_edge_index(edge_type=et, layout=layout)] == [torch.int64, torch.int64]
    assert gs.edge_ids(et).dtype == torch.int64
    rows, cols, perms = gs.csr(edge_types=[et])
    assert rows[et].dtype == cols[et].dtype == torch.int64
    put = (torch.tensor([0, 1], dtype=torch.int32), torch.tensor([1, 0], dtype=torch.int32))
    gs.put_edge_index(put, edge_type=("paper", "again", "paper"), layout="coo", size=(31, 31))
    got = gs.get_edge_index(edge_type=("paper", "again", "paper"), layout="coo")
    assert [t.dtype for t in got] == [torch.int64, torch.int64] and [t.tolist() for t in got] == [[0, 1], [1, 0]]


def test_a_numpy_index_reads_as_a_tensor_index(tmp_path):
    """PyG's ``TensorAttr`` compares its index with an "unset" marker, which a NumPy array answers element by
    element ("truth value ... is ambiguous"): the stores take a NumPy index as the same rows."""
    _, fs, _ = stores(small_homo(), tmp_path, "h", 2)
    rows = np.array([3, 0, 2])
    want = fs[None, "feat", torch.from_numpy(rows)]
    assert torch.equal(fs[None, "feat", rows], want)
    assert torch.equal(fs.get_tensor(group_name=None, attr_name="feat", index=rows), want)
    assert fs.get_tensor_size(group_name=None, attr_name="feat", index=rows)[0] == 3


def test_pygs_remote_backend_size_helpers_on_heterogeneous_stores(tmp_path):
    """``torch_geometric.data.remote_backend_utils`` (what PyG's samplers ask a (feature, graph) store pair)
    gives each type's own node count of the partition, as its partition book says. (On a single-type graph
    its edge type is None, which those helpers cannot read: PyG's own LocalGraphStore fails the same way,
    and PyG's source marks it as not supported yet.)"""
    from torch_geometric.data import remote_backend_utils as remote

    book, fs, gs = stores(small_hetero(), tmp_path, "g", 2)
    own = {t: book.partid2nids(0, t).numel() for t in book.ntypes}
    for t in ("paper", "author"):
        assert remote.num_nodes(fs, gs, t) == own[t]
    assert remote.size(fs, gs, ("author", "writes", "paper")) == (own["author"], own["paper"])


def test_two_layouts_of_one_edge_type_side_by_side(tmp_path):
    """As PyG's ``GraphStore`` allows: a COO and a CSR put for one edge type are both held, listed and read
    back, beside the stored CSC of another."""
    _, _, gs = stores(small_hetero(), tmp_path, "g", 2)
    et = ("paper", "again", "paper")
    coo = (torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0]))
    csr = (torch.tensor([0, 1, 2, 3]), torch.tensor([1, 2, 0]))
    gs.put_edge_index(coo, edge_type=et, layout="coo", size=(31, 31))
    gs.put_edge_index(csr, edge_type=et, layout="csr", size=(31, 31))
    held = {a.layout.value for a in gs.get_all_edge_attrs() if a.edge_type == et}
    assert held == {"coo", "csr"}
    assert [t.tolist() for t in gs.get_edge_index(edge_type=et, layout="coo")] == [t.tolist() for t in coo]
    assert [t.tolist() for t in gs.get_edge_index(edge_type=et, layout="csr")] == [t.tolist() for t in csr]

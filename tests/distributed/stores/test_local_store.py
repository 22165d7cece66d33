"""LocalFeatureStore through PyG's FeatureStore API: rows against the original graph's features, and PyG's
own feature-store contract (test/data/test_feature_store.py of PyG) checked against PyG's reference
``MyFeatureStore`` holding the same tensors; writes go to the store object's overlay, never to the files."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.data import TensorAttr
from torch_geometric.data.feature_store import AttrView
from torch_geometric.testing import MyFeatureStore

from graphshard import IDRangeError, InputError, load_partition, partition_graph
from graphshard.distributed.stores.local import LocalFeatureStore, LocalGraphStore
from graphshard.format.load import verify_checksums
from tests.graphs import small_hetero, small_homo

CITES = ("paper", "cites", "paper")


@pytest.fixture(scope="module")
def hetero(tmp_path_factory):
    path = tmp_path_factory.mktemp("h")
    g = small_hetero()
    partition_graph(g, "h", 2, path, part_method="metis")
    parts = [load_partition(path / "h.json", p) for p in range(2)]
    return g, parts, [LocalFeatureStore(parts[p], p) for p in range(2)], path / "h.json"


@pytest.fixture(scope="module")
def homo(tmp_path_factory):
    path = tmp_path_factory.mktemp("s")
    g = small_homo()
    partition_graph(g, "s", 1, path, part_method="random")
    part = load_partition(path / "s.json", 0)
    return g, part, LocalFeatureStore(part, 0)


def _orig_rows(fs, book, group, rows):
    """Original per-type IDs of a store's rows (an independent route: the partition book's ID maps)."""
    ids = torch.as_tensor(rows) + fs.id_offset(group)
    return (book.to_original_eids(group, ids) if isinstance(group, tuple) else book.to_original(group, ids)).numpy()


def test_rows_are_the_original_features(hetero):
    g, parts, fs, _ = hetero
    book = parts[0].partition_book
    for p in range(2):
        for t in ("paper", "author"):
            n = fs[p].get_tensor_size(t, "feat" if t == "paper" else "emb")[0]
            assert n == book.partid2nids(p, t).numel() > 0
            rows = torch.randperm(n)
            for name, full in g.node_feats[t].items():
                got = fs[p].get_tensor(t, name, index=rows).numpy()
                assert np.array_equal(got, full[_orig_rows(fs[p], book, t, rows)])
        eids = book.partid2eids(p, CITES)
        got = fs[p].get_tensor_from_global_id(CITES, "weight", eids.flip(0))
        want = g.edge_feats[CITES]["weight"][book.to_original_eids(CITES, eids.flip(0)).numpy()]
        assert np.array_equal(got.numpy(), want)
    # paper's feat/label are PyG's x/y too; both names read the same rows
    assert torch.equal(fs[1]["paper", "x", :], fs[1].get_tensor("paper", "feat", index=None))
    assert torch.equal(fs[1]["paper", "y", [2, 0]], fs[1]["paper", "label", torch.tensor([2, 0])])


def _reference(fs, g, book, p) -> MyFeatureStore:
    """PyG's reference store holding partition p's tensors of the original graph, keyed by store rows."""
    ref = MyFeatureStore()
    for t, feats in g.node_feats.items():
        rows = torch.arange(book.partid2nids(p, t).numel())
        for name, full in feats.items():
            pyg_name = {"feat": "x", "label": "y"}.get(name, name)
            ref.put_tensor(torch.as_tensor(full[_orig_rows(fs, book, t, rows)]), t, pyg_name, rows)
    for et, feats in g.edge_feats.items():
        rows = torch.arange(book.partid2eids(p, et).numel())
        for name, full in feats.items():
            ref.put_tensor(torch.as_tensor(full[_orig_rows(fs, book, et, rows)]), et, name, rows)
    return ref


def test_pyg_feature_store_contract(hetero):
    g, parts, fs, _ = hetero
    store, book = fs[0], parts[0].partition_book
    ref = _reference(store, g, book, 0)
    key = lambda a: (a.group_name, a.attr_name)  # noqa: E731
    listed = lambda s: sorted(map(key, s.get_all_tensor_attrs()), key=str)  # noqa: E731
    assert listed(store) == listed(ref)
    n = store.get_tensor_size("paper", "x")[0]
    index = torch.tensor([3, 0, n - 1])
    attr = TensorAttr("paper", "x", index)
    assert TensorAttr("paper").update(attr) == attr
    assert torch.equal(store.get_tensor(attr), ref.get_tensor(attr))
    # every fully specified form, each against the reference store
    for got, want in [
        (store["paper", "x", index], ref["paper", "x", index]),
        (store["paper", "x", None], ref["paper", "x", None]),
        (store["paper", "x", :], ref["paper", "x", :]),
        (store["paper"]["x"][:], ref["paper"]["x"][:]),
        (store["paper"].x[:], ref["paper"].x[:]),
        (store.view().paper.x[:], ref.view().paper.x[:]),
        (store[CITES, "weight", index], ref[CITES, "weight", index]),
        (
            store["author", "emb", torch.zeros(0, dtype=torch.long)],
            ref["author", "emb", torch.zeros(0, dtype=torch.long)],
        ),
    ]:
        assert torch.equal(got, want)
    # the index forms PyG accepts beyond the reference's: lists, slices, ints, masks (PyG's TensorAttr
    # itself cannot hold a NumPy array: its is_set compares the index with ==)
    whole = ref["paper", "x", None]
    assert torch.equal(store["paper", "x", [3, 0, n - 1]], whole[index])
    assert torch.equal(store["paper", "x", 1:7:2], whole[1:7:2])
    assert torch.equal(store["paper", "x", 2], whole[2])
    mask = torch.arange(n) % 3 == 0
    assert torch.equal(store["paper", "x", mask], whole[mask])
    assert store.get_tensor_size("paper", "x", index=index) == (3, 5)
    assert store.get_tensor_size("paper", "x", index=slice(1, 7, 2)) == (3, 5)
    # views
    view = store.view(group_name="paper")
    view.attr_name = "x"
    view["index"] = index
    assert view != "not a 'AttrView' object"
    assert view == AttrView(store, TensorAttr("paper", "x", index))
    with pytest.raises(AttributeError):
        _ = store.view(group_name="paper", index=None).x.paper
    assert store["paper"] == store.view(TensorAttr(group_name="paper"))
    assert store["paper"].x == store.view(TensorAttr(group_name="paper", attr_name="x"))
    assert isinstance(store["paper"], AttrView)
    # missing group / attribute / a call naming no attribute: KeyError, as in the reference
    for s in (store, ref):
        for bad in (("nope", "x", None), ("paper", "nope", None), ("author", "x", None)):
            with pytest.raises(KeyError):
                s.get_tensor(*bad)
        with pytest.raises(KeyError):
            s["paper"]()
    with pytest.raises(KeyError, match="no group or edge type None"):
        store[None, "x", None]  # a multi-type graph has no None group
    assert store.get_tensor_size("nope", "x") is None and store.get_tensor_size("paper", "nope") is None
    # rows outside the partition
    with pytest.raises(IDRangeError, match=r"out of range \[0, \d+\)"):
        store["paper", "x", [n]]
    foreign = book.partid2nids(1, "paper")[:1]
    with pytest.raises(IDRangeError, match="not owned by partition 0"):
        store.get_tensor_from_global_id("paper", "x", foreign)


def _file_states(config) -> dict:
    """Bytes and modification time of every file of a partitioned graph."""
    return {f: (f.read_bytes(), f.stat().st_mtime_ns) for f in sorted(config.parent.rglob("*")) if f.is_file()}


def test_writes_go_to_an_overlay_of_this_object_never_to_the_files(hetero):
    g, parts, _, config = hetero
    files = _file_states(config)
    store, other = LocalFeatureStore(parts[0], 0), LocalFeatureStore(parts[0], 0)  # two objects, one partition
    book = parts[0].partition_book
    stored = store["paper", "x", None].clone()
    n, n_venue = stored.shape[0], book.partid2nids(0, "venue").numel()
    # a placeholder for a featureless node type, a new attribute, rows updated, a tensor replaced, one removed
    store.put_tensor(torch.ones(n_venue, 2), "venue", "x", index=None)
    store["paper", "time", None] = torch.arange(n).flip(0)
    rows = torch.tensor([4, 0])
    store.update_tensor(torch.full((2, 5), 7.0), "paper", "x", index=rows)
    store.put_tensor(np.zeros((store.counts["author"], 3)), "author", "emb", index=None)
    assert store.remove_tensor(CITES, "weight", index=None) and not store.remove_tensor(CITES, "weight", index=None)
    want = stored.clone()
    want[rows] = 7.0
    assert torch.equal(store["paper", "x", None], want) and torch.equal(store["paper", "feat", rows], want[rows])
    assert torch.equal(store["paper", "x", 1:6], want[1:6]) and torch.equal(store["paper", "x", 4], want[4])
    assert torch.equal(store["venue", "x", None], torch.ones(n_venue, 2)) and store["paper", "time", 0] == n - 1
    assert store.get_tensor_size("paper", "time") == (n,) and store.get_tensor_size(CITES, "weight") is None
    listed = {(a.group_name, a.attr_name) for a in store.get_all_tensor_attrs()}
    assert listed == {("paper", "x"), ("paper", "y"), ("author", "emb"), ("venue", "x"), ("paper", "time")}
    with pytest.raises(KeyError):
        store[CITES, "weight", None]
    # the stored rows are as read from the original graph, in this object's other reads and in another object
    orig = torch.from_numpy(g.node_feats["paper"]["feat"][_orig_rows(store, book, "paper", torch.arange(n))])
    assert torch.equal(store.stored_from_global_id("paper", "x", torch.arange(n) + store.id_offset("paper")), orig)
    assert torch.equal(other["paper", "x", None], orig) and other.get_tensor_size("venue", "x") is None
    assert other.get_tensor_size(CITES, "weight") is not None
    gs = LocalGraphStore(parts[0])  # the graph store's overlay: a put over a stored type, a stored CSC removed
    gs.put_edge_index((torch.tensor([0]), torch.tensor([1])), CITES, "coo")
    assert gs.remove_edge_index(("paper", "published_in", "venue"), "csc")
    assert _file_states(config) == files  # not a byte, not a modification time
    verify_checksums(config)


def test_writes_are_checked_naming_the_tensor(hetero):
    _, parts, _, _ = hetero
    store = LocalFeatureStore(parts[0], 0)
    n = store.counts["paper"]
    bad = [
        (lambda: store.put_tensor(torch.zeros(n + 1, 5), "paper", "x", index=None), rf"'paper'/'x'.*{n} rows"),
        (lambda: store.put_tensor(torch.zeros(2, 1), "venue", "x", index=torch.tensor([0, 0])), "more than once"),
        (
            lambda: store.put_tensor(torch.zeros(1, 2), "paper", "new", index=torch.tensor([3])),
            rf"'paper'/'new': a new tensor needs all {n} rows",
        ),
        (lambda: store.put_tensor(torch.zeros(1, 4), "paper", "x", index=torch.tensor([3])), r"row shape \(5,\)"),
        (lambda: store.put_tensor(torch.zeros(1, 5, dtype=torch.float64), "paper", "x", index=[3]), "dtype"),
        (lambda: store.put_tensor("text", "paper", "x", index=None), "expected a torch.Tensor"),
        (lambda: store.put_tensor(torch.zeros(1, 5), "paper", "x", index=[n]), rf"out of range \[0, {n}\)"),
        (lambda: store.put_tensor(torch.zeros(3), None, "x", index=None), "no group or edge type None"),
    ]
    for attempt, match in bad:
        with pytest.raises(InputError, match=match):
            attempt()
    assert {(a.group_name, a.attr_name) for a in store.get_all_tensor_attrs()} == {
        ("paper", "x"),
        ("paper", "y"),
        ("author", "emb"),
        (CITES, "weight"),
    }  # nothing was written


def test_single_type_graph_uses_pyg_none_groups(homo):
    g, part, store = homo
    book = part.partition_book
    x, w = g.node_feats["_N"]["feat"], g.edge_feats[("_N", "_E", "_N")]["w"]
    # node data under group None (and its type name); edge data under (None, None) (and its edge type)
    assert {(a.group_name, a.attr_name) for a in store.get_all_tensor_attrs()} == {
        (None, "x"),
        (None, "y"),
        (None, "train_mask"),
        (None, "val_mask"),
        (None, "test_mask"),
    }
    rows = torch.tensor([5, 1, 7])
    want = x[book.to_original("_N", rows).numpy()]
    for got in (
        store[None, "x", rows],
        store[None]["x"][rows],
        store.view(None).feat[rows],
        store["_N", "feat", rows],
        store.get_tensor(None, "x", index=rows.tolist()),
    ):
        assert np.array_equal(got.numpy(), want)
    erows = torch.tensor([0, 9, 3])
    want_w = w[book.to_original_eids("_N:_E:_N", erows).numpy()]
    for group in ((None, None), ("_N", "_E", "_N"), "_N:_E:_N"):
        assert np.array_equal(store.get_tensor(group, "w", index=erows).numpy(), want_w)
    assert sorted(store.attr_names(None)) == sorted(g.node_feats["_N"]) and store.attr_names((None, None)) == ["w"]
    assert store.get_tensor_size((None, None), "w") == (len(w),)

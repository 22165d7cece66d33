"""The shared-data directory layout: round trips, the real datasets (when present), bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphshard import InputError
from graphshard.datasets import Dataset, community_graph, load_dataset, save_dataset
from graphshard.sparse import CSRRows
from tests.graphs import shared_dataset, small_hetero, small_homo


def _same_graph(a, b):
    assert a.num_nodes == b.num_nodes and a.canonical_etypes == b.canonical_etypes
    for et in a.canonical_etypes:
        for x, y in zip(a.edges[et], b.edges[et]):
            assert np.array_equal(x, y)


def test_round_trip_homogeneous(tmp_path):
    g = small_homo()
    g.edge_feats = {}
    save_dataset(Dataset("h", g, 4), tmp_path / "d")
    back = load_dataset(tmp_path / "d")
    _same_graph(g, back.graph)
    for k in ("feat", "label", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(back.graph.node_feats["_N"][k], g.node_feats["_N"][k]), k
    assert back.num_classes == 4


def test_round_trip_heterogeneous(tmp_path):
    g = small_hetero()
    g.edge_feats = {}
    g.node_feats = {
        "paper": {
            "feat": g.node_feats["paper"]["feat"],
            "label": g.node_feats["paper"]["label"],
            "train_mask": np.arange(60) < 20,
        }
    }
    save_dataset(Dataset("x", g, 4, "paper"), tmp_path / "d")
    back = load_dataset(tmp_path / "d")
    _same_graph(g, back.graph)
    assert back.target_ntype == "paper"
    assert np.array_equal(back.graph.node_feats["paper"]["train_mask"], np.arange(60) < 20)


def test_cora():
    ds = load_dataset(shared_dataset("cora"))
    g = ds.graph
    assert g.num_nodes == {"_N": 2708} and g.total_edges == 10556 and ds.num_classes == 7
    f = g.node_feats["_N"]
    assert f["feat"].shape == (2708, 1433) and f["train_mask"].sum() == 140 and f["test_mask"].sum() == 1000


def test_citeseer_csr_features_stay_sparse():
    d = shared_dataset("citeseer")
    g = load_dataset(d).graph
    indptr = np.load(d / "feat_csr_indptr.npy")
    x = g.node_feats["_N"]["feat"]
    assert isinstance(x, CSRRows) and x.shape == (3327, 3703)
    assert np.array_equal((x.dense() != 0).sum(axis=1), np.diff(indptr))


def test_dblp_heterogeneous():
    ds = load_dataset(shared_dataset("dblp_hetero"))
    g = ds.graph
    assert ds.target_ntype == "author" and ds.num_classes == 4
    assert g.num_nodes["paper"] == 14328 and g.num_edges(("paper", "has_term", "term")) == 85810
    assert g.node_feats["paper"]["feat"].shape == (14328, 4231)
    assert "conference" not in g.node_feats and g.node_feats["author"]["train_mask"].sum() == 80


def test_missing_and_bad_files(tmp_path):
    with pytest.raises(InputError, match="meta.json: missing"):
        load_dataset(tmp_path)
    (tmp_path / "meta.json").write_text(json.dumps({"num_nodes": 3, "feat_format": "none"}))
    with pytest.raises(InputError, match="src.npy: dataset file is missing"):
        load_dataset(tmp_path)
    np.save(tmp_path / "src.npy", np.array([0, 1]))
    np.save(tmp_path / "dst.npy", np.array([1, 7]))
    with pytest.raises(InputError, match=r"dst.npy: position 1: node ID 7 out of range \[0, 3\)"):
        load_dataset(tmp_path)
    np.save(tmp_path / "dst.npy", np.array([{"x": 1}, {}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="dst.npy: not a .npy file of a plain array"):
        load_dataset(tmp_path)


@pytest.mark.parametrize(
    "name, damage, message",
    [
        ("label.npy", lambda f: f.write_bytes(b""), r"label.npy: not a .npy file of a plain array \(No data left"),
        (
            "train_idx.npy",
            lambda f: f.write_bytes(f.read_bytes().replace(b"'shape': (", b"'shape': ((", 1)),
            r"train_idx.npy: not a .npy file of a plain array",
        ),
        (
            "src.npy",
            lambda f: np.save(f, np.full((30, 2), 9, np.int8)),
            r"src.npy: node IDs must be a 1-D array, got shape \(30, 2\)",
        ),
        ("dst.npy", lambda f: np.save(f, np.int64(3)), r"dst.npy: node IDs must be a 1-D array, got shape \(\)"),
        (
            "train_idx.npy",
            lambda f: np.save(f, np.array([], dtype="datetime64[s]")),
            r"train_idx.npy: node indices must be integers, got datetime64",
        ),
        (
            "label.npy",
            lambda f: np.save(f, np.zeros((50, 2, 2), np.int64)),
            r"label.npy: labels must be one number \(or one row of numbers\) per node, shape \(50,\) or \(50, k\), "
            r"got int64 \(50, 2, 2\)",
        ),
        (
            "label.npy",
            lambda f: np.save(f, np.array(["a"] * 50)),
            r"label.npy: labels must be one number .* got <U1 \(50,\)",
        ),
    ],
)
def test_damaged_arrays_are_named(tmp_path, name, damage, message):
    """What the fuzzer of the dataset readers found: each damaged array is one error naming its file."""
    save_dataset(community_graph(num_nodes=50, seed=1), tmp_path / "d")
    damage(tmp_path / "d" / name)
    with pytest.raises(InputError, match=message):
        load_dataset(tmp_path / "d")


UINT64_MAX = 2**64 - 1  # stored as uint64; a cast to int64 would show it as -1


def test_uint64_ids_are_reported_as_stored(tmp_path, capsys):
    from graphshard.cli import main

    d = tmp_path / "data"
    save_dataset(Dataset("d", small_homo(), 2), d)
    src = np.load(d / "src.npy").astype(np.uint64)
    src[5] = UINT64_MAX
    np.save(d / "src.npy", src)
    assert main(["partition", "--dataset", str(d), "--num-parts", "2", "--out", str(tmp_path / "p")]) == 2
    assert capsys.readouterr().err == (
        f"graphshard: error: {d / 'src.npy'}: position 5: node ID 18446744073709551615 out of range [0, 240)\n"
    )
    np.save(d / "src.npy", src.astype(np.int64) % 240)
    train = np.load(d / "train_idx.npy").astype(np.uint64)
    train[3] = UINT64_MAX
    np.save(d / "train_idx.npy", train)
    with pytest.raises(InputError, match=rf"train_idx.npy: position 3: node index {UINT64_MAX} out of range"):
        load_dataset(d)


def test_uint64_ids_in_heterogeneous_edge_files(tmp_path):
    save_dataset(Dataset("h", small_hetero(), 4, "paper"), tmp_path)
    path = tmp_path / "edges" / "author__writes__paper.npy"
    arr = np.load(path).astype(np.uint64)
    arr[1, 7] = UINT64_MAX
    np.save(path, arr)
    with pytest.raises(
        InputError,
        match=rf"^{path}: position 7: row 1: 'paper' node ID {UINT64_MAX} out of range "
        r"\[0, 60\)$",
    ):
        load_dataset(tmp_path)

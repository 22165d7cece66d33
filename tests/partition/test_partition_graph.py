"""partition_graph against the original graph: structure, HALO, IDs, features, for many settings."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from graphshard import InputError, partition_graph
from graphshard.partition.homogenize import homogenize

from .checks import check_partitioning

SETTINGS = [
    (method, hops, parts, trainers)
    for method, hops, parts, trainers in itertools.product(["random", "metis"], [1, 2], [1, 2, 4], [1, 2])
]


@pytest.mark.parametrize("method,hops,parts,trainers", SETTINGS)
def test_partitioning_matches_original(graph, tmp_path, method, hops, parts, trainers):
    partition_graph(
        graph, "g", parts, tmp_path, num_hops=hops, part_method=method, num_trainers_per_machine=trainers, seed=3
    )
    check_partitioning(graph, tmp_path / "g.json", hops, parts, trainers)


def test_explicit_assignment_is_followed(graph, tmp_path):
    n = graph.total_nodes
    assignment = np.random.default_rng(1).integers(0, 3, n)
    partition_graph(graph, "g", 3, tmp_path, part_method=assignment, num_hops=2)
    check_partitioning(graph, tmp_path / "g.json", 2, 3, assignment=assignment)
    assert json.loads((tmp_path / "g.json").read_text())["part_method"] == "explicit"


@pytest.mark.parametrize("method", ["kaminpar", "stream"])
def test_kaminpar_and_stream_partitioning_match_original(graph, tmp_path, method):
    partition_graph(graph, "g", 2, tmp_path, part_method=method)
    check_partitioning(graph, tmp_path / "g.json", 1, 2)


def test_return_mapping_maps_new_to_original(graph, tmp_path):
    nids, eids = partition_graph(graph, "g", 2, tmp_path, part_method="random", return_mapping=True)
    meta = json.loads((tmp_path / "g.json").read_text())
    from safetensors.numpy import load_file

    if graph.is_homogeneous:
        nids, eids = {"_N": nids}, {("_N", "_E", "_N"): eids}
    for t in graph.ntypes:
        got = []
        for p in range(2):
            part = load_file(tmp_path / meta[f"part-{p}"]["part_graph"])
            a, b = meta["node_map"][t][p]
            start = meta["node_map"][graph.ntypes[0]][p][0]
            got.append(part["node/orig_id"][a - start : b - start])
        assert np.array_equal(nids[t].numpy(), np.concatenate(got))
        assert sorted(nids[t].tolist()) == list(range(graph.num_nodes[t]))
    for et in graph.canonical_etypes:
        assert sorted(eids[et].tolist()) == list(range(graph.num_edges(et)))


def test_deterministic_bytes(graph, tmp_path):
    for run in ("a", "b"):
        partition_graph(
            graph, "g", 3, tmp_path / run, num_hops=2, part_method="metis", num_trainers_per_machine=2, seed=5
        )
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert files_a == files_b and len(files_a) == 2 + 3 * 3  # config, output marker, 3 files per part
    for f in files_a:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


def test_different_seed_changes_random_assignment(tmp_path):
    from tests.graphs import small_homo

    g = small_homo()
    partition_graph(g, "g", 2, tmp_path / "a", part_method="random", seed=1)
    partition_graph(g, "g", 2, tmp_path / "b", part_method="random", seed=2)
    assert (tmp_path / "a/part0/graph.safetensors").read_bytes() != (
        tmp_path / "b/part0/graph.safetensors"
    ).read_bytes()


def test_rerun_replaces_previous_output(graph, tmp_path):
    partition_graph(graph, "g", 4, tmp_path, part_method="random")
    partition_graph(graph, "g", 2, tmp_path, part_method="metis")
    check_partitioning(graph, tmp_path / "g.json", 1, 2)
    assert not any(p.name.startswith(".staging") for p in tmp_path.iterdir())


def test_failed_run_leaves_no_config(tmp_path, monkeypatch):
    import graphshard.format.write as write
    from tests.graphs import small_homo

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(write, "write_config", boom)
    with pytest.raises(OSError, match="disk full"):
        partition_graph(small_homo(), "g", 2, tmp_path, part_method="random")
    assert not (tmp_path / "g.json").exists()
    assert not any(p.name.startswith(".staging") for p in tmp_path.iterdir())


def test_balance_ntypes_random_is_exact(tmp_path):
    from tests.graphs import small_homo

    g = small_homo()
    train = g.node_feats["_N"]["train_mask"]
    nids, _ = partition_graph(g, "g", 4, tmp_path, part_method="random", balance_ntypes=train, return_mapping=True)
    meta = json.loads((tmp_path / "g.json").read_text())
    counts = []
    for p in range(4):
        a, b = meta["node_map"]["_N"][p]
        counts.append(int(train[nids[a:b].numpy()].sum()))
        assert b - a in (240 // 4, 240 // 4 + 1)
    assert max(counts) - min(counts) <= 1


@pytest.mark.parametrize("edges", [False, True])
def test_balance_ntypes_metis(tmp_path, edges):
    from graphshard.datasets import community_graph

    g = community_graph(num_nodes=4000, num_classes=4, avg_degree=10, seed=2).graph
    # an unevenly spread class: train nodes concentrated in two communities
    label = g.node_feats["_N"]["label"]
    train = (label < 2) & (np.arange(4000) % 3 == 0)
    nids, _ = partition_graph(
        g,
        "g",
        4,
        tmp_path,
        part_method="metis",
        balance_ntypes=train.astype(np.int64),
        balance_edges=edges,
        return_mapping=True,
    )
    meta = json.loads((tmp_path / "g.json").read_text())
    dst = g.edges[("_N", "_E", "_N")][1]
    indeg = np.bincount(dst, minlength=4000)
    counts, sizes, degs = [], [], []
    for p in range(4):
        a, b = meta["node_map"]["_N"][p]
        members = nids[a:b].numpy()
        counts.append(train[members].sum())
        sizes.append(b - a)
        degs.append(indeg[members].sum())
    assert max(counts) <= 1.1 * np.mean(counts) and max(sizes) <= 1.1 * np.mean(sizes)
    if edges:
        assert max(degs) <= 1.1 * np.mean(degs)


def test_metis_cuts_far_fewer_edges_than_random(tmp_path):
    from graphshard.datasets import community_graph

    g = community_graph(num_nodes=4000, num_classes=4, avg_degree=10, intra=0.9, seed=4).graph
    src, dst = g.edges[("_N", "_E", "_N")]
    cuts = {}
    for method in ("random", "metis", "kaminpar", "stream"):
        nids, _ = partition_graph(g, "g", 4, tmp_path / method, part_method=method, return_mapping=True)
        part = np.empty(4000, dtype=np.int64)
        part[nids.numpy()] = np.repeat(
            np.arange(4),
            1000
            if method == "random"
            else np.diff(
                [r[0] for r in json.loads((tmp_path / method / "g.json").read_text())["node_map"]["_N"]] + [4000]
            ),
        )
        cuts[method] = float(np.mean(part[src] != part[dst]))
    assert cuts["random"] > 0.7
    assert cuts["metis"] < 0.35 * cuts["random"]
    assert cuts["kaminpar"] < 0.35 * cuts["random"]
    assert cuts["stream"] < 0.5 * cuts["random"]


def test_metis_objtype_vol(tmp_path):
    from tests.graphs import small_homo

    g = small_homo()
    partition_graph(g, "g", 2, tmp_path, part_method="metis", objtype="vol")
    check_partitioning(g, tmp_path / "g.json", 1, 2)


def test_pyg_input(tmp_path):
    pytest.importorskip("torch_geometric")
    import torch
    from torch_geometric.data import Data

    data = Data(
        x=torch.randn(30, 3), y=torch.arange(30), edge_index=torch.randint(0, 30, (2, 80)), edge_attr=torch.randn(80, 2)
    )
    nids, _ = partition_graph(data, "pyg", 2, tmp_path, part_method="random", return_mapping=True)
    from graphshard import load_partition

    part = load_partition(tmp_path / "pyg.json", 0)
    assert set(part.node_feats) == {"_N/x", "_N/y"} and set(part.edge_feats) == {"_N:_E:_N/edge_attr"}
    assert torch.equal(part.node_feats["_N/y"], nids[: part.node_feats["_N/y"].shape[0]])


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"graph_name": "bad name"}, "graph name"),
        ({"graph_name": "a/b"}, "graph name"),
        ({"num_parts": 0}, "num_parts"),
        ({"num_parts": 10_000}, "exceeds the number of nodes"),
        ({"num_hops": 0}, "num_hops"),
        ({"part_method": "spectral"}, "unknown partition method"),
        ({"num_trainers_per_machine": 0}, "num_trainers_per_machine"),
        ({"objtype": "volume", "part_method": "metis"}, "objtype"),
        ({"balance_edges": True, "part_method": "random"}, "balance_edges"),
        ({"balance_ntypes": np.zeros(3, np.int64)}, "one entry per node"),
        ({"part_method": np.full(240, 5)}, "outside"),
        ({"part_method": np.zeros(10, np.int64)}, "1-D array of 240"),
    ],
)
def test_bad_arguments(tmp_path, kwargs, match):
    from tests.graphs import small_homo

    args = {"graph_name": "g", "num_parts": 2, "part_method": "random", **kwargs}
    with pytest.raises(InputError, match=match):
        partition_graph(small_homo(), out_path=tmp_path, **args)
    assert not list(tmp_path.glob("*.json"))


def test_tiny_and_empty_types(tmp_path):
    from graphshard import Graph

    g = Graph(
        {"a": 1, "b": 0, "c": 2},
        {
            ("a", "r", "c"): (np.array([0, 0]), np.array([0, 1])),
            ("b", "s", "a"): (np.zeros(0, np.int64), np.zeros(0, np.int64)),
        },
    )
    for method in ("random", "metis"):
        partition_graph(g, "tiny", 3, tmp_path / method, part_method=method)
        check_partitioning(g, tmp_path / method / "tiny.json", 1, 3)


def test_homogenize_offsets():
    from tests.graphs import small_hetero

    g = small_hetero()
    view = homogenize(g)
    assert view.node_offsets.tolist() == [0, 60, 85, 88, 88]
    s, d = g.edges[("author", "writes", "paper")]
    assert np.array_equal(view.src[: len(s)], s + 60) and np.array_equal(view.dst[: len(s)], d)


def test_failed_background_write_cleans_up(tmp_path, monkeypatch):
    import graphshard.format.write as write
    from tests.graphs import small_homo

    calls = []

    def flaky(path, tensors, *meta):
        calls.append(path)
        if len(calls) == 4:
            raise OSError(f"{path}: no space left on device")
        return real(path, tensors, *meta)

    real = write.write_tensors
    monkeypatch.setattr(write, "write_tensors", flaky)
    with pytest.raises(OSError, match="no space left"):
        partition_graph(small_homo(), "g", 3, tmp_path, part_method="random")
    assert [p.name for p in tmp_path.iterdir()] == [".graphshard-output.json"]  # no staging, no config


def test_stale_staging_from_interrupted_run_is_removed(tmp_path):
    from tests.graphs import small_homo

    stale = tmp_path / ".staging-g-424242" / "part0"
    stale.mkdir(parents=True)
    (stale / "graph.safetensors").write_bytes(b"half written")
    partition_graph(small_homo(), "g", 2, tmp_path, part_method="random")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".graphshard-output.json", "g.json", "part0", "part1"]
    check_partitioning(small_homo(), tmp_path / "g.json", 1, 2)

"""OGB's raw node-property layout: fixtures written in exactly that layout from Cora (homogeneous) and
DBLP (heterogeneous) load back equal to the source; bad files are refused naming the file; such a
directory converts straight into the chunked format."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphshard.chunked.load import load_chunked_graph
from graphshard.chunked.spec import read_metadata
from graphshard.cli import main
from graphshard.datasets import load_dataset, load_ogb
from graphshard.errors import InputError
from tests.graphs import shared_dataset

SPLITS = {"train": "train_mask", "valid": "val_mask", "test": "test_mask"}


def _write(path: Path, rows: np.ndarray, fmt: str = "%d") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savetxt(path, rows if rows.ndim == 2 else rows[:, None], fmt=fmt, delimiter=",")  # .gz: gzip


def _splits(where: Path, feats: dict) -> None:
    for name, key in SPLITS.items():
        _write(where / f"{name}.csv.gz", np.flatnonzero(feats[key]))


def _ogb_homo(ds, out: Path) -> Path:
    g = ds.graph
    (src, dst), feats = next(iter(g.edges.values())), next(iter(g.node_feats.values()))
    _write(out / "raw" / "edge.csv.gz", np.stack([src, dst], axis=1))
    _write(out / "raw" / "num-node-list.csv.gz", np.array([g.total_nodes]))
    _write(out / "raw" / "num-edge-list.csv.gz", np.array([src.shape[0]]))
    _write(out / "raw" / "node-feat.csv.gz", np.asarray(feats["feat"], dtype=np.float32), "%.9g")
    _write(out / "raw" / "node-label.csv.gz", np.asarray(feats["label"]))
    _splits(out / "split" / "random", feats)
    return out


def _ogb_hetero(ds, out: Path, skip_feat: tuple[str, ...] = ()) -> Path:
    g, raw = ds.graph, out / "raw"
    types = list(g.num_nodes)
    (raw / "num-node-dict.csv.gz").parent.mkdir(parents=True, exist_ok=True)
    np.savetxt(
        raw / "num-node-dict.csv.gz",
        np.array([[g.num_nodes[t] for t in types]]),
        fmt="%d",
        delimiter=",",
        header=",".join(types),
        comments="",
    )
    for (s, r, d), (src, dst) in g.edges.items():
        _write(raw / "relations" / f"{s}___{r}___{d}" / "edge.csv.gz", np.stack([src, dst], axis=1))
    for t, feats in g.node_feats.items():
        if "feat" in feats and t not in skip_feat:
            _write(raw / "node-feat" / t / "node-feat.csv.gz", np.asarray(feats["feat"], dtype=np.float32), "%.9g")
        if "label" in feats:
            _write(raw / "node-label" / t / "node-label.csv.gz", np.asarray(feats["label"]))
        if "train_mask" in feats:
            _splits(out / "split" / "time" / t, feats)
    return out


def _same_graph(got, want, skip_feat: tuple[str, ...] = ()) -> None:
    assert got.num_nodes == want.num_nodes and set(got.edges) == set(want.edges)
    for et, (src, dst) in want.edges.items():
        assert np.array_equal(got.edges[et][0], src) and np.array_equal(got.edges[et][1], dst), et
    for t, feats in want.node_feats.items():
        for k, v in feats.items():
            if k == "feat" and t in skip_feat:
                assert k not in got.node_feats.get(t, {})
                continue
            assert np.array_equal(got.node_feats[t][k], np.asarray(v, dtype=got.node_feats[t][k].dtype)), (t, k)


def test_cora_in_ogb_layout_loads_equal_to_the_source(tmp_path):
    ds = load_dataset(shared_dataset("cora"))
    got = load_dataset(_ogb_homo(ds, tmp_path / "ogbn-cora"))
    _same_graph(got.graph, ds.graph)
    assert got.num_classes == ds.num_classes and got.name == "ogbn-cora"


def test_dblp_in_ogb_layout_loads_equal_to_the_source(tmp_path):
    ds = load_dataset(shared_dataset("dblp_hetero"))
    got = load_ogb(_ogb_hetero(ds, tmp_path / "ogbn-dblp", skip_feat=("paper",)))  # papers: 4,231-wide CSR
    _same_graph(got.graph, ds.graph, skip_feat=("paper",))
    assert got.target_ntype == "author" and got.num_classes == ds.num_classes


def test_bad_files_are_refused_naming_them(tmp_path):
    ds = load_dataset(shared_dataset("cora"))
    d = _ogb_homo(ds, tmp_path / "o")
    edges = np.stack(next(iter(ds.graph.edges.values())), axis=1)
    edges[5, 1] = 10**6
    _write(d / "raw" / "edge.csv.gz", edges)
    with pytest.raises(InputError, match=r"edge\.csv\.gz: line 6: destination node 1000000 out of range"):
        load_dataset(d)
    _write(d / "raw" / "edge.csv.gz", edges[:5])
    _write(d / "raw" / "node-label.csv.gz", np.zeros(7, dtype=np.int64))
    with pytest.raises(InputError, match=r"node-label\.csv\.gz: 7 rows, expected one per node \(2708\)"):
        load_dataset(d)
    (d / "raw" / "node-label.csv.gz").unlink()
    (d / "split" / "time").mkdir()
    with pytest.raises(InputError, match=r"several split schemes \(random, time\)"):
        load_dataset(d)
    assert load_ogb(d, scheme="random").graph.total_edges == 5


def test_chunk_converts_an_ogb_directory(tmp_path):
    ds = load_dataset(shared_dataset("cora"))
    d = _ogb_homo(ds, tmp_path / "ogbn-cora")
    assert main(["chunk", "--dataset", str(d), "--out", str(tmp_path / "chunked"), "--num-chunks", "3"]) in (0, None)
    back = load_chunked_graph(read_metadata(tmp_path / "chunked"))
    _same_graph(back, ds.graph)

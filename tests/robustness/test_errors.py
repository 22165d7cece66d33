"""Bad input gets a clear error naming the file, key, line or ID at fault (Python API and command line)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphshard import InputError, partition_graph
from graphshard.chunked.load import load_chunked_graph
from graphshard.chunked.spec import read_metadata
from graphshard.chunked.writer import chunk_graph
from graphshard.cli import main
from graphshard.datasets import Dataset, community_graph, load_dataset, save_dataset
from graphshard.distributed.ranks.context import DistError
from graphshard.pipeline.assign import assign_chunked
from graphshard.pipeline.assignment_files import read_assignment
from graphshard.pipeline.dispatch import DispatchOptions, run_dispatch
from tests.graphs import small_hetero, small_homo


def _cli_error(argv, capsys) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("graphshard: error:") and "Traceback" not in err
    return err


@pytest.fixture
def dataset(tmp_path):
    save_dataset(community_graph(num_nodes=300, seed=1), tmp_path / "d")
    return tmp_path / "d"


def _meta(d, change):
    raw = json.loads((d / "meta.json").read_text())
    change(raw)
    (d / "meta.json").write_text(json.dumps(raw))


def test_meta_json_that_is_not_json(dataset, capsys):
    (dataset / "meta.json").write_text("{not json")
    with pytest.raises(InputError, match=r"d/meta.json: not valid JSON"):
        load_dataset(dataset)
    assert "meta.json: not valid JSON" in _cli_error(
        ["partition", "--dataset", str(dataset), "--num-parts", "2", "--out", str(dataset.parent / "p")], capsys
    )


@pytest.mark.parametrize("count", ["abc", 1.5, -3, 10**15])
def test_meta_json_bad_counts(dataset, count):
    _meta(dataset, lambda raw: raw.__setitem__("num_nodes", count))
    with pytest.raises(InputError, match=r"meta.json: num_nodes: "):
        load_dataset(dataset)


@pytest.mark.parametrize("bad", [-1, 300])
def test_index_file_out_of_range(dataset, bad):
    idx = np.load(dataset / "train_idx.npy")
    idx[3] = bad
    np.save(dataset / "train_idx.npy", idx)
    with pytest.raises(InputError, match=rf"train_idx.npy: position 3: node index {bad} out of range \[0, 300\)"):
        load_dataset(dataset)


def _csr_dataset(tmp_path):
    d = tmp_path / "csr"
    save_dataset(Dataset("c", small_homo(), 2), d)
    rng = np.random.default_rng(0)
    n, dim = small_homo().total_nodes, 7
    dense = (rng.random((n, dim)) < 0.3).astype(np.float32)
    indptr = np.concatenate([[0], np.cumsum((dense != 0).sum(1))]).astype(np.int64)
    indices = np.nonzero(dense)[1].astype(np.int64)
    for name, arr in (("feat_indptr.npy", indptr), ("feat_indices.npy", indices), ("feat_data.npy", dense[dense != 0])):
        np.save(d / name, arr)
    _meta(
        d,
        lambda raw: raw.update(
            feat_format="csr", feat_files=["feat_indptr.npy", "feat_indices.npy", "feat_data.npy"], feat_shape=[n, dim]
        ),
    )
    return d, dense


def test_csr_features_load_and_bad_ones_are_named(tmp_path):
    d, dense = _csr_dataset(tmp_path)
    np.testing.assert_array_equal(load_dataset(d).graph.node_feats["_N"]["feat"], dense)
    indices = np.load(d / "feat_indices.npy")
    for value, message in (
        (-1, r"feat_indices.npy: position 4: column -1 outside \[0, 7\)"),
        (7, r"feat_indices.npy: position 4: column 7 outside \[0, 7\)"),
    ):
        bad = indices.copy()
        bad[4] = value
        np.save(d / "feat_indices.npy", bad)
        with pytest.raises(InputError, match=message):
            load_dataset(d)
    np.save(d / "feat_indices.npy", indices)
    indptr = np.load(d / "feat_indptr.npy")
    indptr[2], indptr[3] = indptr[3] + 1, indptr[2]
    np.save(d / "feat_indptr.npy", indptr)
    with pytest.raises(InputError, match=r"feat_indptr.npy: indptr decreases at row 2"):
        load_dataset(d)


def test_negative_seed_is_refused(dataset, tmp_path, capsys):
    with pytest.raises(InputError, match="seed must be a non-negative integer, got -1"):
        partition_graph(small_homo(), "g", 2, tmp_path / "p", part_method="random", seed=-1)
    chunk_graph(small_homo(), tmp_path / "c", 2)
    with pytest.raises(InputError, match="seed must be a non-negative integer, got -2"):
        assign_chunked(tmp_path / "c", tmp_path / "a", 2, seed=-2)
    for argv in (
        ["partition", "--dataset", str(dataset), "--num-parts", "2", "--out", str(tmp_path / "q")],
        ["generate", "community", "--out", str(tmp_path / "g")],
    ):
        assert main(argv + ["--seed", "-1"]) == 2
        assert "argument --seed: expected a non-negative integer, got -1" in capsys.readouterr().err


def test_balance_classes_negative_refused_and_huge_remapped(tmp_path):
    g = small_homo()
    n = g.total_nodes
    neg = np.zeros(n, np.int64)
    neg[9] = -4
    with pytest.raises(InputError, match="node 9 has negative class -4"):
        partition_graph(g, "g", 2, tmp_path / "a", part_method="random", balance_ntypes=neg)
    small = np.arange(n) % 2
    huge = np.where(small == 1, 10**12, 5)  # two classes with huge values: the same partitioning as 0/1
    partition_graph(g, "g", 2, tmp_path / "b", part_method="metis", balance_ntypes=small)
    partition_graph(g, "g", 2, tmp_path / "c", part_method="metis", balance_ntypes=huge)
    for f in (tmp_path / "b").rglob("*.safetensors"):
        assert f.read_bytes() == (tmp_path / "c" / f.relative_to(tmp_path / "b")).read_bytes()


def _csv_chunked(tmp_path):
    chunk_graph(small_hetero(), tmp_path / "c", 2, "csv", graph_name="g")
    return tmp_path / "c" / "edges" / "paper__cites__paper" / "chunk-0.csv"


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda lines: ["src dst\n"] + lines[1:], r"chunk-0.csv, line 1 looks like a header \('src dst'\)"),
        (lambda lines: lines[:2] + ["3 4 junk\n"] + lines[3:], r"chunk-0.csv, line 3: expected 2 columns, got 3"),
        (lambda lines: lines[:2] + ["\n"] + lines[3:], r"chunk-0.csv, line 3: blank line"),
        (lambda lines: lines + ["\n"], r"chunk-0.csv, line \d+: blank line"),
    ],
)
def test_csv_chunk_problems_name_file_and_line(tmp_path, edit, message):
    chunk = _csv_chunked(tmp_path)
    chunk.write_text("".join(edit(chunk.read_text().splitlines(keepends=True))))
    with pytest.raises(InputError, match=message):
        load_chunked_graph(read_metadata(tmp_path / "c"))


def test_data_entry_that_is_not_a_path(tmp_path):
    meta = chunk_graph(small_homo(), tmp_path / "c", 2)
    raw = json.loads(meta.path.read_text())
    raw["edges"]["_N:_E:_N"]["data"][1] = 42
    meta.path.write_text(json.dumps(raw))
    with pytest.raises(InputError, match=r"metadata.json: edges\['_N:_E:_N'\]: data\[1\] must be a file path"):
        read_metadata(meta.path)


def test_feature_chunks_with_different_columns(tmp_path):
    meta = chunk_graph(small_homo(), tmp_path / "c", 2)
    second = meta.node_data["_N"]["feat"].paths[1]
    np.save(second, np.zeros((np.load(second).shape[0], 3), np.float32))
    with pytest.raises(InputError, match=r"chunk-1.npy: rows of shape \(3,\), but chunk-0.npy has rows of shape"):
        load_chunked_graph(read_metadata(tmp_path / "c"))


def test_edge_data_split_unlike_edges(tmp_path):
    g = small_homo()
    g.edge_feats[("_N", "_E", "_N")] = {"w": np.arange(g.total_edges, dtype=np.float32)}
    meta = chunk_graph(g, tmp_path / "c", 2)
    a, b = meta.edge_data[("_N", "_E", "_N")]["w"].paths
    rows_a, rows_b = np.load(a), np.load(b)
    np.save(a, np.concatenate([rows_a, rows_b[:1]]))  # one row moved from the second chunk to the first
    np.save(b, rows_b[1:])
    assign_chunked(tmp_path / "c", tmp_path / "a", 2)
    with pytest.raises(DistError, match=r"chunk-0.npy: \d+ rows, but edge chunk 0 holds \d+ edges"):
        run_dispatch(DispatchOptions(tmp_path / "c", tmp_path / "a", tmp_path / "out"), num_procs=1, timeout=60)
    assert not (tmp_path / "out" / "graph.json").exists()


def test_parquet_chunk_that_is_not_parquet(tmp_path):
    meta = chunk_graph(small_homo(), tmp_path / "c", 2, "parquet")
    meta.edges[("_N", "_E", "_N")].paths[0].write_bytes(b"PAR1 but not really")
    with pytest.raises(InputError, match=r"chunk-0.parquet: cannot read Parquet"):
        load_chunked_graph(read_metadata(tmp_path / "c"))


@pytest.mark.parametrize(
    "text, message",
    [
        ("{oops", "not valid JSON"),
        ('{"method": "random"}', "missing key 'num_parts'"),
        ('{"num_parts": "two"}', "key 'num_parts' must be an integer"),
    ],
)
def test_partition_meta_problems(tmp_path, text, message):
    chunk_graph(small_homo(), tmp_path / "c", 2)
    assign_chunked(tmp_path / "c", tmp_path / "a", 2)
    (tmp_path / "a" / "partition_meta.json").write_text(text)
    with pytest.raises(InputError, match=f"partition_meta.json: {message}"):
        read_assignment(tmp_path / "a", {"_N": small_homo().total_nodes})


def test_huge_declared_chunked_count_is_refused_up_front(tmp_path):
    meta = chunk_graph(small_homo(), tmp_path / "c", 2)
    raw = json.loads(meta.path.read_text())
    raw["num_nodes_per_type"] = [10**12]
    meta.path.write_text(json.dumps(raw))
    with pytest.raises(
        InputError, match=r"metadata.json: 'num_nodes_per_type' \(in all\): 1000000000000 nodes would need"
    ):
        read_metadata(meta.path)

"""Names that become paths can never leave the output directory, whoever supplies them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphshard import Graph, InputError
from graphshard.chunked.spec import read_metadata
from graphshard.chunked.writer import chunk_graph
from graphshard.datasets import Dataset, save_dataset
from graphshard.format.names import check_path_name, inside
from graphshard.pipeline.assign import assign_chunked
from graphshard.pipeline.assignment_files import write_assignment
from graphshard.pipeline.parmetis import export_parmetis
from tests.graphs import small_homo
from tests.robustness.conftest import snapshot

BAD = ["..", ".", "", "a/b", "/abs", "../../x", "a\\b", "nul\0", "x" * 300]


@pytest.mark.parametrize("name", BAD)
def test_validator_refuses_and_names_the_culprit(name):
    with pytest.raises(InputError, match="metadata.json: node_type\\[2\\]"):
        check_path_name(name, "metadata.json: node_type[2]")


def test_validator_keeps_legitimate_names():
    for name in ("paper", "written_by", "_N", "feat", "train_mask", "rev_writes", "ünïcode", "a.b", "x" * 255):
        assert check_path_name(name, "test") == name


def test_inside_refuses_escapes(tmp_path):
    assert inside(tmp_path, "a", "b") == tmp_path.resolve() / "a" / "b"
    with pytest.raises(InputError, match="outside the output directory"):
        inside(tmp_path / "out", "..", "x")


@pytest.mark.parametrize("name", ["..", ".", "x" * 300])
def test_in_memory_graph_refuses_type_and_feature_names(name):
    with pytest.raises(InputError, match="node type"):
        Graph({name: 3}, {})
    with pytest.raises(InputError, match="relation"):
        Graph({"a": 3}, {("a", name, "a"): (np.zeros(1, np.int64), np.zeros(1, np.int64))})
    with pytest.raises(InputError, match="feature name"):
        Graph({"a": 3}, {}, node_feats={"a": {name: np.zeros(3)}})


def _chunked(tmp_path):
    meta = chunk_graph(small_homo(), tmp_path / "c", 2, "numpy", graph_name="g")
    return meta.path, json.loads(meta.path.read_text())


@pytest.mark.parametrize("field, value, culprit", [
    ("node_type", ["/../../x"], "node_type[0]"),
    ("graph_name", "../x", "graph_name"),
    ("node_data", {"_N": {"..": None}}, "node_data['_N'] feature"),
])
def test_chunked_metadata_names_are_refused(tmp_path, field, value, culprit):
    path, raw = _chunked(tmp_path)
    if field == "node_type":
        raw["edge_type"], raw["edges"], raw["num_edges_per_type"], raw["node_data"], raw["edge_data"] = [], {}, [], {}, {}
    if field == "node_data":
        value = {"_N": {"..": raw["node_data"]["_N"]["feat"]}}
    raw[field] = value
    path.write_text(json.dumps(raw))
    with pytest.raises(InputError, match=f"metadata.json: {culprit}".replace("[", "\\[").replace("]", "\\]")):
        read_metadata(path)


def test_chunked_edge_type_names_are_refused(tmp_path):
    path, raw = _chunked(tmp_path)
    raw["edge_type"] = ["_N:..:_N"]
    raw["edges"] = {"_N:..:_N": raw["edges"]["_N:_E:_N"]}
    path.write_text(json.dumps(raw))
    with pytest.raises(InputError, match="'_N:..:_N'"):
        read_metadata(path)


def test_chunked_paths_outside_may_still_be_read(tmp_path):
    """Reading chunk files by absolute or '..' paths stays allowed (as DGL documents)."""
    path, raw = _chunked(tmp_path)
    first = raw["edges"]["_N:_E:_N"]["data"]
    raw["edges"]["_N:_E:_N"]["data"] = [str((path.parent / first[0]).resolve()), "../c/" + first[1]]
    path.write_text(json.dumps(raw))
    assert read_metadata(path).num_edges[("_N", "_E", "_N")] == small_homo().total_edges


def test_writers_refuse_escaping_names_and_write_nothing_outside(tmp_path):
    around = snapshot(tmp_path)
    with pytest.raises(InputError, match="assignment: node type"):
        write_assignment(tmp_path / "a", {"../../escape": np.zeros(3, np.int64)}, 2, "random")
    with pytest.raises(InputError, match="graph_name"):
        chunk_graph(small_homo(), tmp_path / "c", 2, graph_name="../x")
    assert snapshot(tmp_path) == around


def test_parmetis_and_assign_refuse_graph_name_from_metadata(tmp_path):
    path, raw = _chunked(tmp_path)
    raw["graph_name"] = "../x"
    path.write_text(json.dumps(raw))
    around = snapshot(tmp_path)
    for call in (lambda: export_parmetis(path.parent, tmp_path / "pm"), lambda: assign_chunked(path.parent, tmp_path / "a", 2)):
        with pytest.raises(InputError, match="graph_name: name '../x'"):
            call()
    assert snapshot(tmp_path) == around and not (tmp_path.parent / "x_nodes.txt").exists()


def test_too_long_type_name_is_an_input_error_not_oserror(tmp_path):
    """Names whose files (``<src>__<rel>__<dst>.npy``) would not fit are refused up front, not by the OS."""
    with pytest.raises(InputError, match="file names are limited"):
        Graph({"n" * 200: 4}, {("n" * 200, "e" * 60, "n" * 200): (np.arange(4), np.arange(4))})
    with pytest.raises(InputError, match="file names are limited"):
        Graph({"n" * 250: 4}, {})
    g = Graph({"n" * 100: 4}, {("n" * 100, "e" * 30, "n" * 100): (np.arange(4), np.arange(4))})
    save_dataset(Dataset("d", g, 2), tmp_path / "d")  # the longest names accepted do fit


def test_dataset_layout_refuses_escaping_type_names_before_reading(tmp_path):
    from graphshard.datasets import load_dataset
    from tests.graphs import small_hetero
    save_dataset(Dataset("h", small_hetero(), 4, "paper"), tmp_path / "d")
    outside = tmp_path / "x_feat.npy"
    np.save(outside, np.zeros((3, 2)))  # what '../x' would read
    raw = json.loads((tmp_path / "d" / "meta.json").read_text())
    raw["node_types"][1] = "../x"
    (tmp_path / "d" / "meta.json").write_text(json.dumps(raw))
    with pytest.raises(InputError, match=r"meta.json: node_types\[1\]: name '../x' contains '/'"):
        load_dataset(tmp_path / "d")

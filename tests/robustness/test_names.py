"""Names that become paths can never leave the output directory, whoever supplies them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphshard import Graph, InputError
from graphshard.chunked.spec import read_metadata
from graphshard.chunked.writer import chunk_graph
from graphshard.datasets import Dataset, save_dataset
from graphshard.names import check_path_name, inside
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


@pytest.mark.parametrize(
    "field, value, culprit",
    [
        ("node_type", ["/../../x"], "node_type[0]"),
        ("graph_name", "../x", "graph_name"),
        ("node_data", {"_N": {"..": None}}, "node_data['_N'] feature"),
    ],
)
def test_chunked_metadata_names_are_refused(tmp_path, field, value, culprit):
    path, raw = _chunked(tmp_path)
    if field == "node_type":
        raw["edge_type"], raw["edges"], raw["num_edges_per_type"], raw["node_data"], raw["edge_data"] = (
            [],
            {},
            [],
            {},
            {},
        )
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
    for call in (
        lambda: export_parmetis(path.parent, tmp_path / "pm"),
        lambda: assign_chunked(path.parent, tmp_path / "a", 2),
    ):
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


def test_inside_refuses_a_symlink_leading_out(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "link").symlink_to(tmp_path)
    with pytest.raises(InputError, match="outside the output directory"):
        inside(tmp_path / "out", "link", "x")


def test_chunk_writer_guard_holds_for_a_graph_that_skipped_validation(tmp_path):
    """The last guard: even names that never went through the validator cannot leave the output."""
    from dataclasses import fields

    g = small_homo()
    bad = object.__new__(Graph)
    for f in fields(Graph):
        setattr(bad, f.name, getattr(g, f.name))
    bad.node_feats = {"_N": {"../../../../../escape": g.node_feats["_N"]["feat"]}}
    around = snapshot(tmp_path)
    with pytest.raises(InputError, match="outside the output directory"):
        chunk_graph(bad, tmp_path / "a" / "c", 2)
    assert snapshot(tmp_path) == around


def _partitioned(tmp_path):
    from graphshard import partition_graph
    from tests.graphs import small_hetero

    partition_graph(small_hetero(), "g", 2, tmp_path / "p", part_method="random")
    path = tmp_path / "p" / "g.json"
    return path, json.loads(path.read_text())


@pytest.mark.parametrize(
    "key, old, new, culprit",
    [
        ("ntypes", "paper", "../x", r"ntypes: name '../x' contains '/'"),
        ("etypes", "author:writes:paper", "author:..:paper", r"etypes \('author:..:paper'\): name '..'"),
    ],
)
def test_partition_config_refuses_type_names_that_are_not_file_names(tmp_path, key, old, new, culprit):
    from graphshard import load_partition
    from graphshard.errors import FormatError

    path, raw = _partitioned(tmp_path)
    raw[key][new] = raw[key].pop(old)
    path.write_text(json.dumps(raw))
    with pytest.raises(FormatError, match=f"{path}: {culprit}"):
        load_partition(path, 0)


def test_partition_config_refuses_an_escaping_graph_name(tmp_path):
    from graphshard import load_partition
    from graphshard.errors import FormatError

    path, raw = _partitioned(tmp_path)
    raw["graph_name"] = "../../x"
    path.write_text(json.dumps(raw))
    with pytest.raises(FormatError, match=f"{path}: graph_name: name '../../x'"):
        load_partition(path, 0)


def test_too_long_graph_and_type_names_never_reach_the_file_system(tmp_path):
    from graphshard import partition_graph

    around = snapshot(tmp_path)
    with pytest.raises(InputError, match="graph name: name 'aaaa.*file names are limited"):
        partition_graph(small_homo(), "a" * 240, 2, tmp_path / "p", part_method="random")
    with pytest.raises(InputError, match="assignment: node type: name 'tttt.*file names are limited"):
        write_assignment(tmp_path / "a", {"t" * 253: np.zeros(3, np.int64)}, 2, "random")
    assert snapshot(tmp_path) == around
    path, raw = _chunked(tmp_path)
    raw["graph_name"] = "g" * 250
    path.write_text(json.dumps(raw))
    around = snapshot(tmp_path)
    with pytest.raises(InputError, match="metadata.json: graph_name: name 'gggg.*file names are limited"):
        export_parmetis(path.parent, tmp_path / "pm")
    assert snapshot(tmp_path) == around


def test_dataset_layout_refuses_too_long_type_names_before_reading(tmp_path):
    from graphshard.datasets import load_dataset
    from tests.graphs import small_hetero

    save_dataset(Dataset("h", small_hetero(), 4, "paper"), tmp_path / "d")
    raw = json.loads((tmp_path / "d" / "meta.json").read_text())
    raw["node_types"][0] = "p" * 250
    (tmp_path / "d" / "meta.json").write_text(json.dumps(raw))
    with pytest.raises(InputError, match=r"meta.json: node_types\[0\]: name 'pppp.*file names are limited"):
        load_dataset(tmp_path / "d")


def _cli_error(argv, capsys) -> str:
    from graphshard.cli import main

    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("graphshard: error:") and err.count("\n") == 1 and "Traceback" not in err
    return err


def test_cli_assign_refuses_escaping_node_type(tmp_path, capsys):
    path, raw = _chunked(tmp_path / "in")
    raw.update(
        node_type=["/../../x"],
        num_nodes_per_type=[240],
        edge_type=[],
        edges={},
        num_edges_per_type=[],
        node_data={},
        edge_data={},
    )
    path.write_text(json.dumps(raw))
    out = tmp_path / "work" / "assign"
    around = snapshot(tmp_path)
    err = _cli_error(["assign", "--in-dir", str(path.parent), "--out-dir", str(out), "--num-parts", "2"], capsys)
    assert f"{path}: node_type[0]: name '/../../x'" in err
    assert (
        snapshot(tmp_path) == around and not (tmp_path.parent / "x.txt").exists() and not list(tmp_path.rglob("x.txt"))
    )


def test_cli_parmetis_export_refuses_escaping_graph_name(tmp_path, capsys):
    path, raw = _chunked(tmp_path / "in")
    raw["graph_name"] = "../x"
    path.write_text(json.dumps(raw))
    around = snapshot(tmp_path)
    err = _cli_error(
        ["parmetis", "export", "--in-dir", str(path.parent), "--out-dir", str(tmp_path / "w" / "pm")], capsys
    )
    assert f"{path}: graph_name: name '../x'" in err
    assert snapshot(tmp_path) == around and not list(tmp_path.parent.glob("x_*.txt"))


def test_cli_chunk_refuses_escaping_graph_name(tmp_path, capsys):
    save_dataset(Dataset("d", small_homo(), 2), tmp_path / "d")
    around = snapshot(tmp_path)
    err = _cli_error(
        [
            "chunk",
            "--dataset",
            str(tmp_path / "d"),
            "--out",
            str(tmp_path / "w" / "c"),
            "--num-chunks",
            "2",
            "--graph-name",
            "../x",
        ],
        capsys,
    )
    assert "graph_name: name '../x'" in err
    assert snapshot(tmp_path) == around

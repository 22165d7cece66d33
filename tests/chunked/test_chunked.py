"""Chunked graph format: round trips in every format, the older per-chunk counts, and clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphshard import InputError
from graphshard.chunked import read_metadata
from graphshard.chunked.load import load_chunked_graph
from graphshard.chunked.writer import chunk_graph
from graphshard.ids import IDConverter
from tests.graphs import small_hetero, small_homo


def _same(g, h):
    assert g.num_nodes == h.num_nodes and g.canonical_etypes == h.canonical_etypes
    for et in g.canonical_etypes:
        assert all(np.array_equal(a, b) for a, b in zip(g.edges[et], h.edges[et]))
    for t, feats in g.node_feats.items():
        for k, v in feats.items():
            assert np.array_equal(h.node_feats[t][k], v)
    for et, feats in g.edge_feats.items():
        for k, v in feats.items():
            assert np.array_equal(h.edge_feats[et][k], v)


@pytest.mark.parametrize("fmt", ["csv", "numpy", "parquet"])
@pytest.mark.parametrize("make", [small_homo, small_hetero])
def test_round_trip(tmp_path, fmt, make):
    g = make()
    meta = chunk_graph(g, tmp_path / "c", 3, fmt, feat_num_chunks=2)
    _same(g, load_chunked_graph(read_metadata(tmp_path / "c")))
    assert len(meta.edges[g.canonical_etypes[0]].paths) == 3


def test_old_per_chunk_counts_and_absolute_paths(tmp_path):
    g = small_hetero()
    chunk_graph(g, tmp_path / "c", 2, "numpy")
    raw = json.loads((tmp_path / "c/metadata.json").read_text())
    raw["num_nodes_per_chunk"] = [[n] for n in raw.pop("num_nodes_per_type")]
    counts = raw.pop("num_edges_per_type")
    raw["num_edges_per_chunk"] = []
    for key, n in zip(raw["edge_type"], counts):
        spec = raw["edges"][key]
        spec["data"] = [str(tmp_path / "c" / p) for p in spec["data"]]
        rows = [len(np.load(p)) for p in spec["data"]]
        assert sum(rows) == n
        raw["num_edges_per_chunk"].append(rows)
    (tmp_path / "c/metadata.json").write_text(json.dumps(raw))
    meta = read_metadata(tmp_path / "c")
    _same(g, load_chunked_graph(meta))
    conv = IDConverter.from_metadata(raw)
    assert conv.node_to_homo("author", [0]).tolist() == [60]


def _meta(tmp_path, edit):
    chunk_graph(small_hetero(), tmp_path / "c", 2, "csv")
    raw = json.loads((tmp_path / "c/metadata.json").read_text())
    edit(raw)
    (tmp_path / "c/metadata.json").write_text(json.dumps(raw))
    return tmp_path / "c"


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda m: m.pop("node_type"), "missing key 'node_type'"),
        (lambda m: m["node_type"].append("paper"), "duplicate type names \\['paper'\\]"),
        (lambda m: m["edge_type"].__setitem__(0, "author:writes"), "malformed canonical edge type 'author:writes'"),
        (lambda m: m["edge_type"].__setitem__(0, "alien:writes:paper"), "unknown node type 'alien'"),
        (
            lambda m: m["edges"]["author:writes:paper"]["format"].__setitem__("name", "xlsx"),
            "unknown format name 'xlsx'",
        ),
        (lambda m: m["edges"]["author:writes:paper"]["data"].append("nope.csv"), "chunk file .*nope.csv is missing"),
        (lambda m: m["num_nodes_per_type"].pop(), "one count per type"),
    ],
)
def test_metadata_errors(tmp_path, edit, match):
    with pytest.raises(InputError, match=match):
        read_metadata(_meta(tmp_path, edit))


def test_content_errors_name_file_line_value(tmp_path):
    d = _meta(tmp_path, lambda m: None)
    chunk = d / "edges" / "author__writes__paper" / "chunk-1.csv"
    lines = chunk.read_text().splitlines()
    chunk.write_text("\n".join(lines[:2] + ["3 x7"] + lines[3:]) + "\n")
    with pytest.raises(InputError, match=r"chunk-1.csv, line 3: 'x7' is not an integer"):
        load_chunked_graph(read_metadata(d))
    chunk.write_text("\n".join(lines[:4] + ["1 2 3"] + lines[5:]) + "\n")
    with pytest.raises(InputError, match=r"chunk-1.csv, line 5: expected 2 columns, got 3"):
        load_chunked_graph(read_metadata(d))
    chunk.write_text("\n".join(lines[:1] + ["24 60"] + lines[2:]) + "\n")
    with pytest.raises(
        InputError,
        match=r"chunk-1.csv, line 2: destination ID 60 is out of range \[0, 60\) "
        r"for node type 'paper'",
    ):
        load_chunked_graph(read_metadata(d))
    chunk.write_text("\n".join(lines[:-1]) + "\n")  # a row missing: no line is wrong, the counts say which files
    with pytest.raises(
        InputError,
        match=r"hold 87 rows in all \(chunk-0.csv: 44, chunk-1.csv: 43\), but the "
        "metadata declares 88",
    ):
        load_chunked_graph(read_metadata(d))


def test_feature_rows_must_match(tmp_path):
    d = _meta(tmp_path, lambda m: None)
    f = d / "node_data" / "paper" / "feat" / "chunk-0.npy"
    good = np.load(f)
    np.save(f, good[:-1])
    with pytest.raises(InputError, match="declares 60 nodes of type 'paper'"):
        load_chunked_graph(read_metadata(d))
    np.save(f, good)
    f = d / "edge_data" / "paper__cites__paper" / "weight" / "chunk-0.npy"
    np.save(f, np.load(f)[:-2])
    with pytest.raises(InputError, match="edge data must align with the edge chunks"):
        load_chunked_graph(read_metadata(d))


def test_id_converter_from_metadata(tmp_path):
    g = small_hetero()
    meta = chunk_graph(g, tmp_path / "c", 2, "numpy")
    conv = meta.id_converter()
    homo = conv.node_to_homo("venue", np.array([0, 2]))
    assert homo.tolist() == [85, 87]
    t, per = conv.node_to_hetero(homo)
    assert t.tolist() == [2, 2] and per.tolist() == [0, 2]
    assert conv.edge_to_homo("paper:cites:paper", [0]).tolist() == [g.num_edges(("author", "writes", "paper"))]


# -- CSV chunks holding lines that are not rows: the message names the file and the line -----------------
def _edge_chunk(tmp_path):
    """A CSV-chunked graph and the lines of one of its edge chunks."""
    d = _meta(tmp_path, lambda m: None)
    chunk = d / "edges" / "author__writes__paper" / "chunk-1.csv"
    return d, chunk, chunk.read_text().splitlines()


def _load(d):
    load_chunked_graph(read_metadata(d))


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_header_line_is_named_as_such(tmp_path, newline):
    d, chunk, lines = _edge_chunk(tmp_path)
    chunk.write_bytes(newline.join(["src dst", *lines]).encode() + newline.encode())  # one row more than declared
    with pytest.raises(InputError) as exc:
        _load(d)
    assert str(exc.value).startswith(
        f"{chunk}, line 1 looks like a header ('src dst'): a CSV chunk holds data rows only"
    )
    chunk.write_text("\n".join(["src dst", *lines[1:]]) + "\n")  # the header in place of a row: counts agree
    with pytest.raises(InputError, match=rf"^{chunk}, line 1 looks like a header \('src dst'\)"):
        _load(d)


@pytest.mark.parametrize(
    "garbage,problem",
    [
        ("garbage", "expected 2 columns, got 1: 'garbage'"),
        ("12 x", "'x' is not an integer"),
        ("1 2 3", "expected 2 columns, got 3: '1 2 3'"),
        ("7", "expected 2 columns, got 1: '7'"),
        ("1.5 2", "'1.5' is not an integer"),
        ("1-2 3", "'1-2' is not an integer"),
        ("18446744073709551615 0", "source ID 18446744073709551615 does not fit a 64-bit signed integer"),
    ],
)
def test_trailing_garbage_line_is_named(tmp_path, garbage, problem):
    d, chunk, lines = _edge_chunk(tmp_path)
    chunk.write_text("\n".join([*lines, garbage]) + "\n")  # one row more than the metadata declares
    expected = f"{chunk}, line {len(lines) + 1}: {problem} (metadata.json edges['author:writes:paper'])"
    with pytest.raises(InputError) as exc:
        _load(d)
    assert str(exc.value) == expected
    chunk.write_text("\n".join([*lines[:-1], garbage]) + "\n")  # in place of the last row: counts agree
    with pytest.raises(InputError) as exc:
        _load(d)
    assert str(exc.value) == expected.replace(f"line {len(lines) + 1}", f"line {len(lines)}")


def test_unrelated_file_named_as_a_chunk(tmp_path):
    passwd = tmp_path / "etc" / "passwd"
    passwd.parent.mkdir()
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n")

    def point_at_passwd(m):
        m["edges"]["author:writes:paper"]["data"][1] = str(passwd)
        m["node_data"]["paper"]["feat"]["format"] = {"name": "csv", "delimiter": " "}

    d = _meta(tmp_path, point_at_passwd)
    with pytest.raises(InputError) as exc:
        _load(d)
    assert str(exc.value).startswith(f"{passwd}, line 1: expected 2 columns, got 1: 'root:x:0:0:root:/root:/bin/bash'")
    raw = json.loads((d / "metadata.json").read_text())
    raw["edges"]["author:writes:paper"]["data"][1] = str(d / "edges" / "author__writes__paper" / "chunk-1.csv")
    raw["node_data"]["paper"]["feat"]["data"] = [str(passwd)]  # as a feature chunk: not numbers
    (d / "metadata.json").write_text(json.dumps(raw))
    with pytest.raises(InputError, match=rf"^{passwd}, line 1: 'root:x:0:0:root:/root:/bin/bash' is not a number"):
        _load(d)


def test_feature_csv_header_and_cli(tmp_path, capsys):
    from graphshard.cli import main

    d, chunk, lines = _edge_chunk(tmp_path)
    feat = tmp_path / "feat.csv"
    feat.write_text("f0 f1\n" + "".join(f"{i}.5 {-i}e-3\n" for i in range(60)))
    raw = json.loads((d / "metadata.json").read_text())
    raw["node_data"]["paper"]["feat"] = {"format": {"name": "csv"}, "data": [str(feat)]}
    (d / "metadata.json").write_text(json.dumps(raw))
    assert main(["partition", "--dataset", str(d), "--num-parts", "2", "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"graphshard: error: {feat}, line 1 looks like a header ('f0 f1'): a CSV chunk holds data rows "
        "only, no header line; remove it (metadata.json node_data['paper']['feat'])\n"
    )


def test_bad_line_found_across_blocks(tmp_path, monkeypatch):
    import graphshard.chunked.csv_lines as csv_lines

    rng = np.random.default_rng(1)
    rows = [f"{a} {b}" for a, b in rng.integers(0, 60, (2000, 2))]
    path = tmp_path / "e.csv"
    for bad_at in (0, 1, 17, 1000, 1999):
        lines = list(rows)
        lines[bad_at] = "-3 +"
        path.write_text("\n".join(lines))  # no final newline
        for block in (7, 64, 1 << 24):
            monkeypatch.setattr(csv_lines, "BLOCK", block)
            assert csv_lines.first_bad_line(path, " ", 2, True) == (bad_at + 1, "'+' is not an integer")
        path.write_text("\n".join(rows) + "\n")
        assert csv_lines.first_bad_line(path, " ", 2, True) is None


@pytest.mark.parametrize("fmt", ["numpy", "parquet"])
def test_uint64_ids_in_binary_chunks_are_reported_as_stored(tmp_path, fmt):
    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = chunk_graph(small_homo(), tmp_path / "c", 2, fmt)
    path = meta.edges[("_N", "_E", "_N")].paths[1]
    if fmt == "numpy":
        rows = np.load(path).astype(np.uint64)
    else:
        rows = np.stack([c.to_numpy() for c in pq.read_table(path).columns], axis=1).astype(np.uint64)
    rows[4, 1] = 2**64 - 1  # a cast to int64 would show -1
    if fmt == "numpy":
        np.save(path, rows)
    else:
        pq.write_table(pa.table({"c0": rows[:, 0], "c1": rows[:, 1]}), path)
    with pytest.raises(
        InputError,
        match=rf"^{path}, line 5: destination ID 18446744073709551615 does not fit a "
        r"64-bit signed integer \(metadata.json edges\['_N:_E:_N'\]\)$",
    ):
        load_chunked_graph(read_metadata(tmp_path / "c"))

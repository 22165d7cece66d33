"""Fuzzing the chunked graph input (:func:`read_metadata` and :func:`load_chunked_graph`, what ``assign``,
``partition`` and the dispatch readers use): ``metadata.json`` with keys dropped, renamed or holding junk,
paths to missing or unrelated files, deep nesting and damaged bytes; CSV chunks of random lines (headers,
blank lines, extra columns, huge, negative or non-integer numbers, CRLF, no final newline); NumPy chunks of
any dtype and shape, damaged, or pickles (never unpickled); Parquet chunks of any columns and types, or
damaged. Each read gives the graph an independent reading of the files gives, or an
:class:`~graphshard.errors.InputError` naming the file at fault (and, for a CSV line, the line)."""

from __future__ import annotations

import importlib
import io
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from graphshard import Graph
from graphshard.chunked import read_metadata
from graphshard.chunked.load import load_chunked_graph
from graphshard.chunked.writer import chunk_graph
from graphshard.errors import InputError
from graphshard.format.npyfile import quiet_header_parse
from tests.fuzz_helpers import (
    FUZZ,
    PickleTrap,
    assert_named_error,
    damaged,
    json_values,
    near_misses,
    nested,
    no_writes,
)

AB, BA = ("a", "r", "b"), ("b", "s", "a")
NUM = {"a": 4, "b": 3}


def _graph() -> Graph:
    """Two node types, two edge types (two chunks each), a node and an edge feature."""
    return Graph(
        dict(NUM),
        {AB: (np.array([0, 1, 2, 3]), np.array([0, 1, 2, 0])), BA: (np.array([0, 2]), np.array([1, 3]))},
        node_feats={"a": {"x": np.arange(8, dtype=np.float32).reshape(4, 2)}},
        edge_feats={AB: {"w": np.arange(4.0)}},
    )


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The valid chunked graph in each format (never modified), and a directory to copy it to per example."""
    importlib.import_module("pyarrow.csv")  # imported here, not in the first timed example
    importlib.import_module("pyarrow.parquet")
    root = tmp_path_factory.mktemp("chunked")
    for fmt in ("csv", "numpy", "parquet"):
        chunk_graph(_graph(), root / fmt, 2, fmt)
    (root / "unrelated.txt").write_text("root:x:0:0:root:/root:/bin/bash\n")
    return root


def _work(base: Path, fmt: str) -> Path:
    work = base / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(base / fmt, work)
    return work


def _meta(work: Path) -> dict:
    return json.loads((work / "metadata.json").read_text())


def _set_meta(work: Path, raw: dict) -> None:
    (work / "metadata.json").write_text(json.dumps(raw))


def _load(work: Path, mentions: tuple[str, ...] = ()) -> Graph | None:
    """The loaded graph, or None after a named error naming a file below ``work`` (and ``mentions``)."""
    with no_writes(work.parent):  # the other graphs and files beside it too
        g, err = assert_named_error(lambda: load_chunked_graph(read_metadata(work)), work, mentions=mentions)
    if err is not None:
        assert isinstance(err, InputError), f"{type(err).__name__}: {err}"
    return g


# -- an independent reading of the files -----------------------------------------------------------------------
_INT_FIELD = re.compile(r'-?[0-9]+|"-?[0-9]+"')
# the numbers pyarrow reads, "Infinity" among them, and a leading "+" (hypothesis found "+1" read as 1.0)
_FLOAT_FIELD = re.compile(r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?|\+?(nan|NaN)|[-+]?(inf|Infinity)")


def _csv_lines(data: bytes) -> list[str]:
    """The lines of a CSV chunk as a user sees them (a final newline ends the last line, CRLF is a newline)."""
    text = data.decode("utf-8").removeprefix("\ufeff")
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _csv_rows(data: bytes, integers: bool) -> tuple[list[list], int | None]:
    """The rows of a CSV chunk, and the first line (1-based) that is no row of numbers (None: all are)."""
    try:
        lines = _csv_lines(data)
    except UnicodeDecodeError:
        lines = data.decode("utf-8", "replace").split("\n")
        return [], next(i for i, line in enumerate(lines, 1) if "\ufffd" in line)
    rows, width = [], 2 if integers else None
    split = [line.split(" ") if integers else _unquoted(line) for line in lines]
    logical = set() if integers else _logical_columns(split)
    for i, fields in enumerate(split, 1):
        width = len(fields) if width is None else width
        pattern = _INT_FIELD if integers else _FLOAT_FIELD
        if len(fields) != width or not all(
            (f in _LOGICAL) if j in logical else pattern.fullmatch(f) for j, f in enumerate(fields)
        ):
            return rows, i
        row = [
            int(f.strip('"')) if integers else _LOGICAL[f] if j in logical else float(f) for j, f in enumerate(fields)
        ]
        if integers and not all(-(2**63) <= v < 2**63 for v in row):  # no int64: that line is named
            return rows, i
        rows.append(row)
    return rows, None


# A feature column that holds one of pyarrow's words for true or false is read as booleans, where every value of
# it is one of these (1 and 0 included); any other value there makes the file unreadable.
_LOGICAL = {w: 1.0 for w in ("1", "true", "True", "TRUE")} | {w: 0.0 for w in ("0", "false", "False", "FALSE")}


def _logical_columns(rows: list[list[str]]) -> set[int]:
    """The columns of a feature chunk (its lines' fields) with a word for true or false in them."""
    return {j for fields in rows for j, f in enumerate(fields) if f in _LOGICAL and not f.isdigit()}


def _unquoted(line: str) -> list[str]:
    """A feature line's fields, each without a surrounding pair of double quotes (pyarrow's quoting: "1" is 1)."""
    return [f[1:-1] if len(f) > 1 and f[0] == f[-1] == '"' else f for f in line.split(" ")]


def _read_chunk(path: Path, fmt: str, integers: bool) -> np.ndarray:
    if fmt == "numpy":
        with quiet_header_parse():  # a damaged header that still parses warns, as in graphshard's reader
            return np.load(path, allow_pickle=False)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        if not table.num_rows:  # columns of any type: no rows
            return np.zeros((0, table.num_columns) if table.num_columns > 1 else 0, np.int64)
        cols = [c.to_numpy() for c in table.columns]
        return cols[0] if len(cols) == 1 else np.stack(cols, axis=1)
    rows, bad = _csv_rows(path.read_bytes(), integers)
    assert bad is None, f"{path}, line {bad} is no row, but the chunk was read"
    arr = np.array(rows, dtype=np.int64 if integers else np.float64)
    return arr[:, 0] if arr.ndim == 2 and arr.shape[1] == 1 else arr


def _files(work: Path, spec: dict) -> list[tuple[Path, str]]:
    return [(Path(p) if os.path.isabs(p) else work / p, spec["format"]["name"]) for p in spec["data"]]


def _expected(work: Path) -> Graph:
    """The graph the (accepted) metadata describes, read with NumPy, pyarrow and Python alone."""
    raw = _meta(work)
    ntypes, etypes = raw["node_type"], [tuple(e.split(":")) for e in raw["edge_type"]]
    counts = raw.get("num_nodes_per_type") or [sum(c) for c in raw["num_nodes_per_chunk"]]
    edges = {}
    for et in etypes:
        parts = [_read_chunk(p, fmt, True).reshape(-1, 2) for p, fmt in _files(work, raw["edges"][":".join(et)])]
        parts = [p if p.size else np.zeros((0, 2), np.int64) for p in parts]  # an empty chunk: of any dtype
        both = np.concatenate(parts) if parts else np.zeros((0, 2), np.int64)
        edges[et] = (both[:, 0].astype(np.int64), both[:, 1].astype(np.int64))

    def feats(section: dict) -> dict:
        return {
            k: np.concatenate([_read_chunk(p, fmt, False) for p, fmt in _files(work, spec)])
            for k, spec in section.items()
        }

    return Graph(
        dict(zip(ntypes, counts)),
        edges,
        {t: feats(d) for t, d in raw.get("node_data", {}).items()},
        {tuple(e.split(":")): feats(d) for e, d in raw.get("edge_data", {}).items()},
    )


def _same(got: Graph, want: Graph) -> None:
    assert got.num_nodes == want.num_nodes
    assert got.canonical_etypes == want.canonical_etypes
    for et in want.canonical_etypes:
        for a, b in zip(got.edges[et], want.edges[et]):
            assert a.dtype == np.int64 and a.tolist() == b.tolist(), et
    for mine, theirs in ((got.node_feats, want.node_feats), (got.edge_feats, want.edge_feats)):
        assert {k: sorted(v) for k, v in mine.items() if v} == {k: sorted(v) for k, v in theirs.items() if v}
        for t, d in theirs.items():
            for k, v in d.items():
                assert mine[t][k].dtype.kind in "biuf", (t, k, mine[t][k].dtype)
                assert np.array_equal(np.asarray(mine[t][k]), v, equal_nan=True), (t, k)


def _per_chunk_counts(work: Path) -> None:
    """Rewrite the metadata with the older per-chunk counts (num_nodes_per_chunk, num_edges_per_chunk)."""
    raw = _meta(work)
    raw["num_nodes_per_chunk"] = [[n - n // 2, n // 2] for n in raw.pop("num_nodes_per_type")]
    raw["num_edges_per_chunk"] = [
        [len(_read_chunk(p, fmt, True)) for p, fmt in _files(work, raw["edges"][e])]
        for e, _ in zip(raw["edge_type"], raw.pop("num_edges_per_type"))
    ]
    _set_meta(work, raw)


@pytest.mark.parametrize("per_chunk", [False, True])
@pytest.mark.parametrize("fmt", ["csv", "numpy", "parquet"])
def test_valid_graph_reads_back(base, fmt, per_chunk):
    work = _work(base, fmt)
    if per_chunk:
        _per_chunk_counts(work)
    g = _load(work)
    _same(g, _graph())
    _same(g, _expected(work))


# -- metadata.json ---------------------------------------------------------------------------------------------
def _paths(value, at=()):
    """Every (path, value) inside a JSON document (the document itself first)."""
    yield at, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*at, i))


def _edit(doc, at, how):
    """``doc`` with the value at ``at`` changed by ``how(container, key)``."""
    container = doc
    for k in at[:-1]:
        container = container[k]
    how(container, at[-1])


@st.composite
def edited_metadata(draw, raw: dict):
    """``raw`` after 1-3 edits: a key dropped or misspelt, a value replaced by junk, a list item added or
    removed, a chunk path pointed at a missing, unrelated or other chunk's file."""
    doc = json.loads(json.dumps(raw))
    for _ in range(draw(st.integers(1, 3))):
        spots = [at for at, _ in _paths(doc) if at]
        if not spots:
            break
        at = draw(st.sampled_from(spots))
        kind = draw(st.sampled_from(["drop", "rename", "junk", "junk", "path", "add", "count"]))
        if kind == "drop":
            _edit(doc, at, lambda c, k: c.pop(k))
        elif kind == "rename" and isinstance(at[-1], str):
            new = draw(near_misses(at[-1]) | st.text(max_size=6))
            _edit(doc, at, lambda c, k: c.__setitem__(new, c.pop(k)))
        elif kind == "path":
            target = draw(
                st.sampled_from(
                    [
                        "nope.csv",
                        "",
                        ".",
                        "..",
                        "metadata.json",
                        "../unrelated.txt",
                        "/",
                        "edges/a__r__b/chunk-1.csv",
                        "edges/b__s__a/chunk-0.npy",
                        "node_data/a/x/chunk-0.npy",
                        "edge_data/a__r__b/w/chunk-1.parquet",
                        "edges/a__r__b/chunk-0.parquet",
                        "node_data/a/x",
                        "a\0b",
                    ]
                )
            )
            _edit(doc, at, lambda c, k: c.__setitem__(k, target))
        elif kind == "add" and isinstance(_value(doc, at), (list, dict)):
            item = draw(json_values(4))
            _edit(doc, at, lambda c, k: c[k].append(item) if isinstance(c[k], list) else c[k].__setitem__("x", item))
        elif kind == "count":
            number = draw(st.integers(-2, 9) | st.sampled_from([2**63, 2**64, 10**400, 1.0, 4.5, True, "4", None]))
            _edit(doc, at, lambda c, k: c.__setitem__(k, number))
        else:
            junk = draw(json_values(6))
            _edit(doc, at, lambda c, k: c.__setitem__(k, junk))
    return doc


def _value(doc, at):
    for k in at:
        doc = doc[k]
    return doc


@settings(FUZZ, max_examples=150)
@given(st.sampled_from(["csv", "numpy", "parquet"]), st.booleans(), st.data())
def test_edited_metadata(base, fmt, per_chunk, data):
    work = _work(base, fmt)
    if per_chunk:
        _per_chunk_counts(work)
    _set_meta(work, data.draw(edited_metadata(_meta(work))))
    g = _load(work)
    if g is not None:
        _same(g, _expected(work))


@pytest.mark.parametrize(
    "doc",
    [
        nested(100_000).encode(),
        nested(100_000, '{"a":', "}").encode(),
        b"\xff\xfe{}",
        b"",
        b"[]",
        b"null",
        b'"metadata"',
        '{"node_type": ["ä"]}'.encode("latin-1"),
        b'{"node_type": NaN}',
        b'{"graph_name": "x", "node_type": ["a"], "edge_type": [],'
        b'"num_nodes_per_type": [1e400], "num_edges_per_type": [], "edges": {}}',
        b'{"graph_name": "x", "node_type": ["a"], "edge_type": [],'
        b'"num_nodes_per_type": [' + nested(100_000).encode() + b'], "num_edges_per_type": [], "edges": {}}',
    ],
)
def test_metadata_that_is_no_json_object(base, doc):
    work = _work(base, "numpy")
    (work / "metadata.json").write_bytes(doc)
    assert _load(work, mentions=(str(work / "metadata.json"),)) is None


@FUZZ
@given(st.sampled_from(["csv", "numpy", "parquet"]), st.data())
def test_damaged_metadata_bytes(base, fmt, data):
    work = _work(base, fmt)
    doc = (work / "metadata.json").read_bytes()
    (work / "metadata.json").write_bytes(data.draw(damaged(doc)))
    g = _load(work)
    if g is not None:
        _same(g, _expected(work))


def _cr_only(raw):
    raw["edges"]["a:r:b"]["data"] = ["cr.csv", "edges/a__r__b/chunk-1.csv"]


@pytest.mark.parametrize(
    "edit, mentions",
    [
        # raw ValueError (only single character unicode strings can be converted to Py_UCS4); 5 taken as "5"
        (lambda m: m["edges"]["a:r:b"]["format"].__setitem__("delimiter", ", "), ("edges['a:r:b']", "delimiter")),
        (lambda m: m["edges"]["a:r:b"]["format"].__setitem__("delimiter", 5), ("edges['a:r:b']", "delimiter")),
        (lambda m: m["edges"]["a:r:b"]["format"].__setitem__("delimiter", "\n"), ("edges['a:r:b']", "delimiter")),
        # raw TypeError (int + NoneType)
        (
            lambda m: m.__setitem__("num_nodes_per_chunk", [[2, None], [3]]) or m.pop("num_nodes_per_type"),
            ("num_nodes_per_chunk",),
        ),
        # raw OverflowError (integer division result too large for a float)
        (lambda m: m["num_nodes_per_type"].__setitem__(0, 10**400), ("num_nodes_per_type",)),
        # raw IndexError (a type whose edges have no chunks, and rows declared)
        (lambda m: m["edges"]["a:r:b"].__setitem__("data", []), ("edges['a:r:b']", "declares 4")),
        # raw OSError (File name too long) from is_file()
        (lambda m: m["edges"]["a:r:b"]["data"].__setitem__(0, "x" * 300), ("edges['a:r:b']", "x" * 300)),
    ],
)
def test_metadata_mistakes_are_named(base, edit, mentions):
    work = _work(base, "csv")
    raw = _meta(work)
    edit(raw)
    _set_meta(work, raw)
    assert _load(work, mentions=(str(work / "metadata.json"), *mentions)) is None


def test_metadata_paths_outside_and_absolute(base):
    """Chunk paths may be absolute or lead out of the directory (they are read, never written)."""
    work = _work(base, "numpy")
    raw = _meta(work)
    raw["edges"]["a:r:b"]["data"] = [
        str(base / "numpy" / "edges" / "a__r__b" / "chunk-0.npy"),
        "../numpy/edges/a__r__b/chunk-1.npy",
    ]
    _set_meta(work, raw)
    _same(_load(work), _graph())


# -- CSV chunks ------------------------------------------------------------------------------------------------
ID = (st.integers(-1, 4) | st.sampled_from([2**63 - 1, 2**63, 2**64, 10**20, -(2**63), -(2**63) - 1])).map(str)
FIELD = (
    ID
    | ID.map(lambda s: f'"{s}"')
    | ID.map(lambda s: "+" + s)
    | ID.map(lambda s: "0" + s)
    | st.sampled_from(
        [
            "",
            "1.0",
            "1e3",
            "nan",
            "NaN",
            "inf",
            "null",
            "NA",
            "0x1",
            "1_0",
            "١",
            "-",
            "+",
            "--1",
            "src",
            "dst",
            "#",
            "\t1",
            "\x00",
            "é",
        ]
    )
)
ROW = st.lists(FIELD, min_size=1, max_size=3).map(" ".join)
LINE = (
    ROW
    | ROW
    | st.just("")
    | st.sampled_from(["src dst", "source destination", "# comment", "1 2 3", " "])
    | st.text(st.sampled_from("0123456789 -+.,\t\"'eE#x\r"), max_size=8)
)
VALID_LINE = st.tuples(st.integers(0, 3), st.integers(0, 2)).map(lambda p: f"{p[0]} {p[1]}")


@st.composite
def csv_text(draw, line: st.SearchStrategy[str]) -> bytes:
    lines = draw(st.lists(line, max_size=6))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    text = newline.join(lines) + (newline if lines and draw(st.booleans()) else "")
    data = text.encode()
    if draw(st.integers(0, 9)) == 0:
        data = b"\xef\xbb\xbf" + data
    if draw(st.integers(0, 9)) == 0:
        i = draw(st.integers(0, len(data)))
        data = data[:i] + draw(st.sampled_from([b"\xff", b"\xc3", b"\x00", b"\r"])) + data[i:]
    return data


def _csv_edge_case(base, data: bytes, adjust: bool) -> tuple[Path, Path]:
    """The CSV graph with edge chunk 0 of a:r:b replaced by ``data``; with ``adjust``, the metadata declares
    as many edges as the chunks hold lines (so that reading gets to the rows)."""
    work = _work(base, "csv")
    chunk = work / "edges" / "a__r__b" / "chunk-0.csv"
    chunk.write_bytes(data)
    raw = _meta(work)
    raw.pop("edge_data")  # the edge feature would no longer align with the edges
    if adjust:
        lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        raw["num_edges_per_type"][0] = lines + 2
    _set_meta(work, raw)
    return work, chunk


def _check_csv_edges(work: Path, chunk: Path, data: bytes) -> None:
    rows, bad = _csv_rows(data, integers=True)
    declared = _meta(work)["num_edges_per_type"][0]
    if bad is None and len(rows) + 2 == declared:
        out_of_range = next((i for i, (s, d) in enumerate(rows, 1) if not (0 <= s < 4 and 0 <= d < 3)), None)
        if out_of_range is None:  # every line a row, in range: the graph as written
            g = _load(work)
            assert g is not None, data
            _same(g, _expected(work))
        else:
            assert _load(work, mentions=(f"{chunk}, line {out_of_range}",)) is None
        return
    if bad is not None:
        # the first line that is no row is named, unless the counts disagree with the number of lines
        assert _load(work, mentions=(str(chunk),) if len(rows) + 2 != declared else (f"{chunk}, line {bad}",)) is None
    else:
        assert _load(work, mentions=("metadata.json",)) is None


@settings(FUZZ, max_examples=150)
@given(csv_text(LINE | VALID_LINE), st.booleans())
def test_csv_edge_chunk_of_random_lines(base, data, adjust):
    work, chunk = _csv_edge_case(base, data, adjust)
    _check_csv_edges(work, chunk, data)


@FUZZ
@given(csv_text(VALID_LINE), st.booleans())
def test_csv_edge_chunk_of_valid_lines(base, data, adjust):
    work, chunk = _csv_edge_case(base, data, adjust)
    _check_csv_edges(work, chunk, data)


@pytest.mark.parametrize(
    "data, line",
    [
        (b"0 0\n1 \n", 2),
        (b"0 0\n 1\n", 2),
        (b"0 0\nnan 1\n", 2),
        (b"0 0\n+1 1\n", 2),
        (b"0 0\n1_0 1\n", 2),
        (b"0 0\n0x1 1\n", 2),
        (b"0 0\n0xFFFFFFFFFFFFFFFF 1\n", 2),
        (b"0 0\nNA 1\n", 2),
        (b"0 0\n\xd9\xa3 1\n", 2),
        (b"0 0\r1 1\n", 1),
        (b"\xef\xbb\xbf0 \t1", 1),
        (b"0 0\n1\t 1\n", 2),
    ],
)
def test_csv_edge_lines_that_are_no_rows(base, data, line):
    """An empty field or NA was read as null and reported as "edge IDs must be integers, got float64" (no
    line); +1 and 1_0 as "cannot parse CSV" (no line); 0x1 read as 1 and 0xFFFFFFFFFFFFFFFF as -1; a lone
    CR ended a row (two rows read from a line counted as one); a tab beside a number was dropped (found by
    the fuzzer above on a fresh clone)."""
    work, chunk = _csv_edge_case(base, data, adjust=True)
    assert _load(work, mentions=(f"{chunk}, line {line}:",)) is None


@pytest.mark.parametrize("data", [b"3 2", b"\xef\xbb\xbf3 2\n", b'"3" 2\r\n'])
def test_csv_edge_chunk_of_one_line(base, data):
    """One line without its newline was refused by pyarrow ("Empty CSV file or block")."""
    work, chunk = _csv_edge_case(base, data, adjust=True)
    g = _load(work)
    assert g is not None and g.edges[AB][0].tolist() == [3, 2, 3] and g.edges[AB][1].tolist() == [2, 2, 0]


FLOAT = st.floats(allow_nan=True, allow_infinity=True, width=32).map(repr) | st.sampled_from(
    [
        "",
        "1",
        "-2",
        "1e3",
        "1.",
        ".5",
        "nan",
        "NaN",
        "NA",
        "null",
        "true",
        "x",
        "1,5",
        "0x1",
        "1_0",
        "+1",
        "٣",
        "inf",
        "-inf",
        "Infinity",
        '"1"',
    ]
)


@FUZZ
@given(
    st.lists(st.lists(FLOAT, min_size=1, max_size=3).map(" ".join), min_size=0, max_size=6),
    st.booleans(),
    st.sampled_from(["\n", "\r\n"]),
)
@example(["1", "1", "1", "true"], False, "\n")  # read as booleans (found in CI)
@example(["true", "2", "1", "0"], False, "\n")  # no type fits the column
@example(["1.5 true", "2 false", "3 1", "4 0"], True, "\n")  # a column of numbers beside one of booleans
def test_csv_node_feature(base, lines, final_newline, newline):
    work = _work(base, "csv")
    feat = work / "node_data" / "a" / "x" / "feat.csv"
    data = (newline.join(lines) + (newline if lines and final_newline else "")).encode()
    feat.write_bytes(data)
    raw = _meta(work)
    raw["node_data"]["a"]["x"] = {"format": {"name": "csv", "delimiter": " "}, "data": [str(feat)]}
    _set_meta(work, raw)
    g = _load(work)
    rows, bad = _csv_rows(data, integers=False)
    if g is None:
        assert bad is not None or len(rows) != NUM["a"], data
        return
    assert bad is None and len(rows) == NUM["a"], data  # read: every line a row of numbers
    _same(g, _expected(work))


@pytest.mark.parametrize(
    "text, line", [(b"1 2\n3 \n5 6\n7 8\n", 2), (b"1 2\n3 NA\n5 6\n7 8\n", 2), (b"1 2\n3 null\n5 6\n7 8\n", 2)]
)
def test_csv_feature_missing_values_are_named(base, text, line):
    """An empty field, NA or null was read as NaN, silently."""
    work = _work(base, "csv")
    feat = work / "node_data" / "a" / "x" / "feat.csv"
    feat.write_bytes(text)
    raw = _meta(work)
    raw["node_data"]["a"]["x"] = {"format": {"name": "csv"}, "data": [str(feat)]}
    _set_meta(work, raw)
    assert _load(work, mentions=(f"{feat}, line {line}:",)) is None


# -- NumPy chunks ----------------------------------------------------------------------------------------------
def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    return buf.getvalue()


DTYPES = st.one_of(
    hnp.integer_dtypes(),
    hnp.unsigned_integer_dtypes(),
    hnp.floating_dtypes(),
    hnp.boolean_dtypes(),
    hnp.complex_number_dtypes(),
    hnp.unicode_string_dtypes(max_len=3),
    hnp.byte_string_dtypes(max_len=3),
    hnp.datetime64_dtypes(),
    hnp.timedelta64_dtypes(),
    st.just(np.dtype([("a", "<i8"), ("b", "<i8")])),
    st.just(np.dtype(np.longdouble)),
)
SHAPES = st.sampled_from([(2, 2), (3, 2), (0, 2), (2,), (2, 3), (2, 1), (), (2, 2, 1), (1, 2), (0,)])
ARRAYS = hnp.arrays(DTYPES, SHAPES) | hnp.arrays(np.int64, SHAPES).map(lambda a: a.view("V8"))
EDGE_ARRAYS = st.tuples(
    hnp.arrays(np.int64, st.sampled_from([(2, 2), (3, 2), (0, 2)]), elements=st.integers(-1, 4)),
    st.sampled_from([np.int64, np.int32, np.uint8, np.uint64, np.int8, np.dtype(">i8")]),
).map(lambda a: a[0].astype(a[1]))  # -1 as uint64: 2**64 - 1


def _declare_rows(work: Path, where: str, rows: int | None) -> None:
    """Make the metadata declare ``rows`` rows for chunk 0 (a:r:b's edges, or node feature a/x)."""
    raw = _meta(work)
    raw.pop("edge_data")
    if rows is not None and where == "edges":
        raw["num_edges_per_type"][0] = rows + 2
    elif rows is not None:
        raw["num_nodes_per_type"][0] = rows + 2
        raw["edges"].pop("a:r:b")  # the edges name nodes of type a that may be gone now
        raw["edge_type"].remove("a:r:b")
        raw["num_edges_per_type"].pop(0)
    _set_meta(work, raw)


def _rows(arr: np.ndarray) -> int | None:
    return arr.shape[0] if arr.ndim else None


def _check_binary(work: Path, chunk: Path, where: str, arr: np.ndarray | None) -> None:
    """Reading gives what an independent reading gives, or names ``chunk`` (a binary chunk has no lines)."""
    g = _load(work)
    if g is None:
        return
    assert arr is not None, "damaged bytes were read"
    if where == "edges":  # (an empty chunk may be of any dtype)
        assert (arr.dtype.kind in "iu" or not arr.size) and arr.ndim == 2 and arr.shape[1] == 2, arr.dtype
    else:
        assert arr.dtype.kind in "biuf" and arr.shape[1:] == (2,), arr.dtype
    _same(g, _expected(work))


@FUZZ
@given(st.sampled_from(["edges", "feature"]), ARRAYS | EDGE_ARRAYS, st.booleans())
def test_npy_chunk_of_any_dtype_and_shape(base, where, arr, adjust):
    """Features of strings, complex numbers or long doubles were read (and failed later, naming no input
    file), of dates a raw DTypePromotionError; timedelta64 edge IDs were read as integers."""
    work = _work(base, "numpy")
    chunk = work / ("edges/a__r__b/chunk-0.npy" if where == "edges" else "node_data/a/x/chunk-0.npy")
    chunk.write_bytes(_npy(arr))
    _declare_rows(work, where, _rows(arr) if adjust else None)
    if arr.dtype.hasobject:
        assert _load(work, mentions=(str(chunk),)) is None
        return
    _check_binary(work, chunk, where, arr)


@FUZZ
@given(st.sampled_from(["edges", "feature"]), st.data())
def test_damaged_npy_chunk(base, where, data):
    work = _work(base, "numpy")
    chunk = work / ("edges/a__r__b/chunk-0.npy" if where == "edges" else "node_data/a/x/chunk-0.npy")
    damaged_bytes = data.draw(damaged(chunk.read_bytes()))
    chunk.write_bytes(damaged_bytes)
    try:
        with quiet_header_parse():  # as read_npy reads it
            arr = np.load(io.BytesIO(damaged_bytes), allow_pickle=False)
    except Exception:  # unreadable: the reader must say so, naming the chunk
        arr = None
    _declare_rows(work, where, None)
    if arr is None:
        assert _load(work, mentions=(str(chunk),)) is None
    else:
        _check_binary(work, chunk, where, arr)


@pytest.mark.parametrize(
    "what",
    [
        "pickle_array",
        "pickle",
        "npz",
        "damaged_npz",
        "empty",
        "huge_shape",
        "overflow_shape",
        "unclosed_header",
        "zero_d",
        "directory",
    ],
)
@pytest.mark.parametrize("where", ["edges", "feature"])
def test_npy_chunk_that_is_no_array(base, what, where):
    """Pickles are never loaded; an empty file was a raw EOFError, a header with an unclosed bracket a
    tokenize.TokenError, a shape beyond C long an OverflowError, a 0-d array an IndexError, a file beginning
    as a zip archive does a zipfile.BadZipFile."""
    work = _work(base, "numpy")
    chunk = work / ("edges/a__r__b/chunk-0.npy" if where == "edges" else "node_data/a/x/chunk-0.npy")
    marker = base / "unpickled"
    good = chunk.read_bytes()
    if what == "pickle_array":
        chunk.write_bytes(_npy(np.array([PickleTrap(marker), 1], dtype=object)))
    elif what == "pickle":
        import pickle

        chunk.write_bytes(pickle.dumps(PickleTrap(marker)))
    elif what == "npz":
        np.savez(open(chunk, "wb"), a=np.zeros((2, 2), np.int64))
    elif what == "damaged_npz":
        chunk.write_bytes(b"PK\x03\x04" + good)
    elif what == "empty":
        chunk.write_bytes(b"")
    elif what in ("huge_shape", "overflow_shape", "unclosed_header"):
        shape = {
            "huge_shape": b"(10000000000, 2)",
            "overflow_shape": b"(99999999999999999999999, 2)",
            "unclosed_header": b"(2, 2 ",
        }[what]
        chunk.write_bytes(good.replace(b"(2, 2)", shape))
    elif what == "zero_d":
        chunk.write_bytes(_npy(np.array(1, dtype=np.int64)))
    else:
        chunk.unlink()
        chunk.mkdir()
    assert _load(work, mentions=(str(chunk),)) is None
    assert not marker.exists(), "a pickle was loaded"


# -- Parquet chunks --------------------------------------------------------------------------------------------
@st.composite
def parquet_tables(draw):
    import pyarrow as pa

    rows = draw(st.sampled_from([0, 2, 3]))
    types = {
        "int64": (pa.int64(), st.integers(-1, 4)),
        "int8": (pa.int8(), st.integers(-1, 4)),
        "uint64": (pa.uint64(), st.sampled_from([0, 1, 2**63, 2**64 - 1])),
        "float": (pa.float64(), st.floats(allow_nan=True)),
        "float32": (pa.float32(), st.floats(width=32)),
        "bool": (pa.bool_(), st.booleans()),
        "str": (pa.string(), st.text(max_size=3)),
        "bin": (pa.binary(), st.binary(max_size=3)),
        "list": (pa.list_(pa.int64()), st.lists(st.integers(0, 3), max_size=2)),
        "ts": (pa.timestamp("s"), st.integers(0, 10)),
        "dur": (pa.duration("s"), st.integers(0, 10)),
        "date": (pa.date32(), st.integers(0, 10)),
        "null": (pa.null(), st.none()),
        "dict": (pa.dictionary(pa.int32(), pa.int64()), st.integers(0, 3)),
        "struct": (pa.struct([("x", pa.int64())]), st.fixed_dictionaries({"x": st.integers(0, 3)})),
        "decimal": (pa.decimal128(5, 1), st.decimals(-9, 9, places=1)),
    }
    cols = {}
    for j in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(sorted(types)))
        typ, values = types[name]
        vals = draw(st.lists(values | st.none() if draw(st.booleans()) else values, min_size=rows, max_size=rows))
        if name == "dict":
            cols[f"c{j}"] = pa.array(vals, pa.int64()).dictionary_encode()
        else:
            cols[f"c{j}"] = pa.array(vals, typ)
    return pa.table(cols) if cols else pa.table({})


def _parquet(table) -> bytes:
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


@FUZZ
@given(st.sampled_from(["edges", "feature"]), parquet_tables(), st.booleans())
def test_parquet_chunk_of_any_columns(base, where, table, adjust):
    work = _work(base, "parquet")
    chunk = work / ("edges/a__r__b/chunk-0.parquet" if where == "edges" else "node_data/a/x/chunk-0.parquet")
    chunk.write_bytes(_parquet(table))
    _declare_rows(work, where, table.num_rows if adjust else None)
    g = _load(work)
    if g is None:
        return
    assert all(c.null_count == 0 for c in table.columns), "a null (missing value) was read"
    arr = _read_chunk(chunk, "parquet", where == "edges")
    if where == "edges":  # (an empty chunk may hold columns of any type)
        assert (arr.dtype.kind in "iu" or not arr.size) and arr.ndim == 2 and arr.shape[1] == 2, arr.dtype
    else:
        assert arr.dtype.kind in "biuf" and arr.shape[1:] == (2,), arr.dtype
    _same(g, _expected(work))


@FUZZ
@given(st.sampled_from(["edges", "feature"]), st.data())
def test_damaged_parquet_chunk(base, where, data):
    work = _work(base, "parquet")
    chunk = work / ("edges/a__r__b/chunk-0.parquet" if where == "edges" else "node_data/a/x/chunk-0.parquet")
    chunk.write_bytes(data.draw(damaged(chunk.read_bytes())))
    _declare_rows(work, where, None)
    g = _load(work)
    if g is not None:  # the damage spared what is read (statistics, padding): the rows as written
        _same(g, _expected(work))


@pytest.mark.parametrize("where", ["edges", "feature"])
def test_parquet_nulls_are_named(base, where):
    """A null in a feature column was read as NaN (silently), in an edge column reported as "edge IDs must
    be integers, got float64"."""
    import pyarrow as pa

    work = _work(base, "parquet")
    chunk = work / ("edges/a__r__b/chunk-0.parquet" if where == "edges" else "node_data/a/x/chunk-0.parquet")
    chunk.write_bytes(_parquet(pa.table({"c0": pa.array([0, 1]), "c1": pa.array([1, None])})))
    _declare_rows(work, where, None)
    assert _load(work, mentions=(str(chunk), "line 2")) is None

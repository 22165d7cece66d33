"""Fuzzing OGB's raw node-property layout (:func:`load_ogb`): a tiny homogeneous and a tiny heterogeneous
directory, with a file removed, its gzip damaged, its CSV rows replaced by junk (empty fields, NaN, text,
floats, huge numbers, extra or missing columns, blank lines), headers and relation names changed. Each load
gives a dataset whose every file says what was written, or an :class:`InputError` naming a file of the
directory; never another exception, never a write."""

from __future__ import annotations

import contextlib
import gzip
import math
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphshard.datasets import load_ogb
from graphshard.errors import InputError
from tests.fuzz_helpers import FUZZ, assert_named_error, damaged, no_writes

RNG = np.random.default_rng(7)
SPLITS = ("train", "valid", "test")


def _gz(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text.encode(), mtime=0))


def _rows(arr: np.ndarray) -> str:
    arr = arr if arr.ndim == 2 else arr[:, None]
    return "".join(",".join(map(str, row)) + "\n" for row in arr.tolist())


def _homo(d: Path) -> None:
    n = 12
    _gz(d / "raw" / "num-node-list.csv.gz", f"{n}\n")
    _gz(d / "raw" / "edge.csv.gz", _rows(RNG.integers(0, n, (30, 2))))
    _gz(d / "raw" / "node-feat.csv.gz", _rows(RNG.standard_normal((n, 3)).astype(np.float32).round(3)))
    _gz(d / "raw" / "node-label.csv.gz", _rows(RNG.integers(0, 3, n)))
    for i, s in enumerate(SPLITS):
        _gz(d / "split" / "random" / f"{s}.csv.gz", _rows(np.arange(i, n, 3)))


def _hetero(d: Path) -> None:
    n = {"author": 6, "paper": 4}
    _gz(d / "raw" / "num-node-dict.csv.gz", "author,paper\n6,4\n")
    _gz(
        d / "raw" / "relations" / "author___writes___paper" / "edge.csv.gz",
        _rows(np.stack([RNG.integers(0, 6, 9), RNG.integers(0, 4, 9)], 1)),
    )
    _gz(d / "raw" / "relations" / "paper___cites___paper" / "edge.csv.gz", _rows(RNG.integers(0, 4, (5, 2))))
    _gz(d / "raw" / "node-feat" / "paper" / "node-feat.csv.gz", _rows(RNG.standard_normal((4, 2)).round(3)))
    _gz(d / "raw" / "node-label" / "paper" / "node-label.csv.gz", _rows(RNG.integers(0, 2, 4)))
    for i, s in enumerate(SPLITS):
        _gz(d / "split" / "time" / "paper" / f"{s}.csv.gz", _rows(np.arange(i, n["paper"], 3)))


@pytest.fixture(scope="module", params=["homo", "hetero"])
def pristine(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(f"ogb_{request.param}") / "ogbn-tiny"
    (_homo if request.param == "homo" else _hetero)(d)
    load_ogb(d)  # imports pyarrow here, not in the first timed example
    return d


@pytest.fixture(scope="module")
def hetero(tmp_path_factory):
    d = tmp_path_factory.mktemp("ogb_names") / "ogbn-tiny"
    _hetero(d)
    return d


def _files(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())


def _consistent(ds) -> None:
    """Whatever loaded holds what a dataset must: IDs in range, one row per node, integer labels."""
    g = ds.graph
    for (s, _, t), (src, dst) in g.edges.items():
        assert src.dtype == dst.dtype == np.int64 and src.shape == dst.shape
        assert ((src >= 0) & (src < g.num_nodes[s])).all() and ((dst >= 0) & (dst < g.num_nodes[t])).all()
    for t, feats in g.node_feats.items():
        for k, v in feats.items():
            assert v.shape[0] == g.num_nodes[t], (t, k, v.shape)
            if k == "label":
                assert v.dtype == np.int64 and (v >= -1).all(), v  # -1: unlabelled
            if k.endswith("_mask"):
                assert v.dtype == bool


def _load(d: Path) -> None:
    with no_writes(d):
        got, _ = assert_named_error(lambda: load_ogb(d), d)
    if got is not None:
        _consistent(got)
    return got


@contextlib.contextmanager
def _edited(d: Path, *rels: str):
    """Edit ``rels`` (files or directories of ``d``) in the block; they are put back as they were after it
    (copying the whole directory per example would cost more than the loads)."""
    keep = Path(tempfile.mkdtemp(dir=d.parent))
    for i, rel in enumerate(rels):
        shutil.copytree(d / rel, keep / str(i)) if (d / rel).is_dir() else shutil.copy2(d / rel, keep / str(i))
    try:
        yield d
    finally:
        for i, rel in enumerate(rels):
            shutil.rmtree(d / rel, ignore_errors=True) if (d / rel).is_dir() else (d / rel).unlink(missing_ok=True)
            shutil.move(keep / str(i), d / rel)
        keep.rmdir()


def test_pristine_directories_load(pristine):
    ds = _load(pristine)
    assert ds is not None and ds.graph.total_edges > 0


# -- junk rows ----------------------------------------------------------------------------------------------------
FIELD = st.one_of(
    st.integers(-3, 15).map(str),
    st.sampled_from(
        [
            "",
            "NaN",
            "nan",
            "inf",
            "-inf",
            "1e300",
            "1.5",
            "2.0",
            "x",
            '"3"',
            " 4",
            "99999999999999999999",
            "-1",
            "18446744073709551615",
            "null",
            "NA",
            "0x1",
        ]
    ),
)
ROW = st.lists(FIELD, min_size=0, max_size=4).map(",".join)
CSV = st.lists(ROW, min_size=0, max_size=14).map(lambda rows: "\n".join(rows) + "\n")


@FUZZ
@given(data=st.data())
def test_junk_rows(pristine, data):
    rel = data.draw(st.sampled_from(_files(pristine)))
    text = data.draw(CSV | st.sampled_from(["", "\n", "\n1\n2\n", "1\n\n2\n", "5,6\n", "a,b\n1,2\n1,2\n"]))
    with _edited(pristine, rel) as d:
        _gz(d / rel, text)
        ds = _load(d)
        if ds is not None:
            _agrees(ds, d, rel, text)


def _int(field: str) -> int:
    """A field as pyarrow reads an integer: decimal, or unsigned hexadecimal ``0x...`` (a value beyond 64 bits
    wraps there, to a negative ID the reader refuses as out of range), either in double quotes or not."""
    if len(field) > 1 and field[0] == field[-1] == '"':  # pyarrow's quoting: "3" is 3
        field = field[1:-1]
    hexa = re.fullmatch(r"\s*0[xX]([0-9a-fA-F]+)\s*", field)
    return int(hexa.group(1), 16) if hexa else int(field)


def _ints(text: str) -> list[list[int]] | None:
    """The rows of ``text`` if every field is an integer, else None."""
    rows = [line.split(",") for line in text.splitlines() if line.strip()]
    try:
        return [[_int(f) for f in row] for row in rows]
    except ValueError:
        return None


def _agrees(ds, d: Path, rel: str, text: str) -> None:
    """A junk file that loaded was read as written: edges and split indices are its integers."""
    g, parts = ds.graph, Path(rel).parts
    if parts[-1] == "edge.csv.gz":
        et = tuple(parts[-2].split("___")) if parts[-2] != "raw" else next(iter(g.edges))
        rows = _ints(text)
        assert rows is not None and all(len(r) == 2 for r in rows), f"{rel} loaded from {text!r}"
        src, dst = g.edges[et]
        assert [[int(a), int(b)] for a, b in zip(src, dst)] == rows
    if parts[-1].replace(".csv.gz", "") in SPLITS:
        rows = _ints(text)
        assert rows is not None and all(len(r) == 1 for r in rows), f"{rel} loaded from {text!r}"
        t = parts[-2] if len(parts) == 4 else next(iter(g.num_nodes))
        key = {"train": "train_mask", "valid": "val_mask", "test": "test_mask"}[parts[-1].split(".")[0]]
        assert sorted(set(np.flatnonzero(g.node_feats[t][key]).tolist())) == sorted({r[0] for r in rows})
    if parts[-1] == "node-label.csv.gz":
        t = parts[-2] if len(parts) == 4 else next(iter(g.num_nodes))
        for line, y in zip(text.splitlines(), g.node_feats[t]["label"]):
            try:  # what a label line may be: an integer, or empty or NaN for unlabelled
                v = float(line) if line.strip() not in ("", "NA", "null") else math.nan
            except ValueError:
                raise AssertionError(f"{rel}: label {line!r} read as {y}") from None
            assert (math.isnan(v) and y == -1) or v == y, (line, y)


# -- damaged and missing files, headers, names -------------------------------------------------------------------
@FUZZ
@given(data=st.data())
def test_damaged_gzip(pristine, data):
    rel = data.draw(st.sampled_from(_files(pristine)))
    raw = (pristine / rel).read_bytes()
    with _edited(pristine, rel) as d:
        (d / rel).write_bytes(data.draw(damaged(raw) | damaged(gzip.decompress(raw))))  # also: plain text in a .gz
        _load(d)


@pytest.mark.parametrize("what", ["file", "dir"])
def test_missing_files_and_directories(pristine, what):
    entries = (
        _files(pristine)
        if what == "file"
        else sorted(str(p.relative_to(pristine)) for p in pristine.rglob("*") if p.is_dir())
    )
    for rel in entries:
        with _edited(pristine, rel) as d:
            (d / rel).unlink() if what == "file" else shutil.rmtree(d / rel)
            _load(d)


HEADERS = st.lists(
    st.sampled_from(["author", "paper", "x", "", "a b", "a/b", "..", "author", '"paper"', "é"]), min_size=0, max_size=3
)


@FUZZ
@given(
    HEADERS,
    st.lists(FIELD, max_size=3),
    st.sampled_from(
        [
            "a___r___b",
            "author___writes",
            "author___w___ghost",
            "a___b___c___d",
            "..___r___paper",
            "author___w r___paper",
        ]
    ),
)
def test_hetero_headers_and_relation_names(hetero, header, counts, relation):
    with _edited(hetero, "raw/num-node-dict.csv.gz", "raw/relations") as d:
        _gz(d / "raw" / "num-node-dict.csv.gz", ",".join(header) + "\n" + ",".join(counts) + "\n")
        (d / "raw" / "relations" / "author___writes___paper").rename(d / "raw" / "relations" / relation)
        ds = _load(d)
        if ds is not None:
            assert len(header) == len(set(header)), f"node types {header} read as {ds.graph.num_nodes}"


@pytest.mark.parametrize(
    "rel, text, line",
    [
        ("raw/node-label.csv.gz", "0\n1\ninf\n" + "0\n" * 9, 3),
        ("raw/node-label.csv.gz", "0\n1\n1e300\n" + "0\n" * 9, 3),
        ("raw/edge.csv.gz", "0,1\n3,\n", 2),
        ("split/random/train.csv.gz", "0,1\n2,3\n", 1),
    ],
)
def test_bad_rows_are_named(tmp_path, rel, text, line):
    """inf or 1e300 labels were stored as -9223372036854775808; an empty edge field read as node -1; a split
    file of two columns read as twice as many indices."""
    d = tmp_path / "ogbn-tiny"
    _homo(d)
    _gz(d / rel, text)
    _, err = assert_named_error(lambda: load_ogb(d), d, mentions=(f"line {line}",))
    assert isinstance(err, InputError)


@pytest.mark.parametrize("text", ["\n0,1\n2,3\n", "\n\n0,1\n\n2,3", "0,1\n2,3"])
def test_blank_lines_and_a_missing_last_newline(tmp_path, text):
    """A blank first line made the file look empty (a graph without edges); the last line may lack its newline."""
    d = tmp_path / "ogbn-tiny"
    _homo(d)
    _gz(d / "raw" / "edge.csv.gz", text)
    _gz(d / "raw" / "num-node-list.csv.gz", "12")  # one line without its newline: pyarrow alone refuses it
    g = load_ogb(d).graph
    assert [e.tolist() for e in g.edges[next(iter(g.edges))]] == [[0, 2], [1, 3]] and g.num_nodes["_N"] == 12


def test_duplicate_node_types_are_refused(tmp_path):
    d = tmp_path / "o"
    _hetero(d)
    _gz(d / "raw" / "num-node-dict.csv.gz", "author,paper,author\n6,4,9\n")
    _, err = assert_named_error(lambda: load_ogb(d), d, mentions=("'author'",))
    assert isinstance(err, InputError)


def test_a_node_type_without_nodes_and_empty_files(tmp_path):
    """Empty feature and label files of a type with no nodes: the label file was an AttributeError."""
    d = tmp_path / "o"
    _hetero(d)
    _gz(d / "raw" / "num-node-dict.csv.gz", "author,paper,ghost\n6,4,0\n")
    _gz(d / "raw" / "node-feat" / "ghost" / "node-feat.csv.gz", "")
    _gz(d / "raw" / "node-label" / "ghost" / "node-label.csv.gz", "")
    got, err = assert_named_error(lambda: load_ogb(d), d)
    assert err is None and got.graph.num_nodes["ghost"] == 0

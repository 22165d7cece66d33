"""Fuzzing the assignment files of the chunked pipeline (:func:`read_assignment`): ``<ntype>.txt`` of random
text, bytes and line endings, ``<ntype>.npy`` of any dtype, shape and length (pickled objects, ``.npz``
archives, truncated or corrupt headers included), and ``partition_meta.json`` of any JSON. Each read gives
the partitions written, or an :class:`InputError` naming the file (and the line, where one is at fault)."""

from __future__ import annotations

import importlib
import io
import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from graphshard.errors import InputError
from graphshard.pipeline.assignment_files import META_NAME, read_assignment
from tests.fuzz_helpers import FUZZ, assert_named_error, damaged, json_values, nested, no_writes

N = 5  # nodes of the one node type


@pytest.fixture(scope="module")
def where(tmp_path_factory):
    importlib.import_module("pyarrow.csv")  # imported here, not in the first timed example
    return tmp_path_factory.mktemp("assignment")


def _put(where, name: str, data: bytes | None, meta: bytes | None = None) -> None:
    for f in where.iterdir():
        f.unlink()
    if data is not None:
        (where / name).write_bytes(data)
    if meta is not None:
        (where / META_NAME).write_bytes(meta)


def _read(where, num_parts=None, mentions=()):
    with no_writes(where):
        got, err = assert_named_error(lambda: read_assignment(where, {"paper": N}, num_parts), where, mentions=mentions)
    if err is not None:
        assert isinstance(err, InputError), err
        return None
    per_type, parts = got
    arr = per_type["paper"]
    assert arr.dtype == np.int64 and arr.shape == (N,)
    assert ((arr >= 0) & (arr < parts)).all()
    return arr, parts


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    return buf.getvalue()


# -- valid files read back ----------------------------------------------------------------------------------------
PARTS = st.lists(st.integers(0, 7), min_size=N, max_size=N)


@FUZZ
@given(PARTS, st.sampled_from(["\n", "\r\n"]), st.integers(0, 3), st.sampled_from(["", " ", '"']), st.booleans())
def test_valid_text_files(where, parts, newline, trailing_blank, pad, last_newline):
    text = newline.join(f"{pad}{p}{pad}" for p in parts) + (newline if last_newline else "") + newline * trailing_blank
    _put(where, "paper.txt", text.encode())
    got = _read(where, num_parts=8)
    assert got is not None and got[0].tolist() == parts


INT_DTYPES = st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64])


@FUZZ
@given(PARTS, INT_DTYPES, st.booleans())
def test_valid_npy_files(where, parts, dtype, with_meta):
    meta = json.dumps({"version": 1, "num_parts": 8, "method": "random"}).encode() if with_meta else None
    _put(where, "paper.npy", _npy(np.array(parts, dtype=dtype)), meta)
    got = _read(where)
    assert got is not None and got[0].tolist() == parts
    assert got[1] == (8 if with_meta else max(parts) + 1)


# -- junk ---------------------------------------------------------------------------------------------------------
LINE = st.text(st.sampled_from("0123456789 -+,.\t\r\"'eExNA#_\x00é٣"), max_size=8) | st.integers().map(str)
TEXT = st.lists(LINE, max_size=8).map("\n".join).map(lambda t: t.encode("utf-8")) | st.binary(max_size=40)
_INT = re.compile(r"\s*[+-]?[0-9]+\s*")


@settings(FUZZ, max_examples=150)
@given(TEXT, st.sampled_from([None, 2, 8]))
def test_random_text(where, data, num_parts):
    _put(where, "paper.txt", data)
    got = _read(where, num_parts)
    if got is not None:  # accepted: every line (but blank ones at the end) is the integer read from it
        lines = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n").split("\n")
        while lines and not lines[-1].strip():
            lines.pop()
        assert all(_INT.fullmatch(line.strip('"')) for line in lines), lines
        assert got[0].tolist() == [int(line.strip().strip('"')) for line in lines]


@FUZZ
@given(PARTS.map(lambda p: "\n".join(map(str, p)).encode() + b"\n").flatmap(damaged))
def test_damaged_text(where, data):
    _put(where, "paper.txt", data)
    _read(where)


@pytest.mark.parametrize(
    "text, line",
    [
        (b"0\n1\nNA\n0\n0\n", 3),
        (b"0\n\n1\n0\n0\n", 2),
        (b"0\n1\n\xff\n0\n0\n", 3),
        (b"0\n1\n2\n3\n99999999999999999999\n", 5),
        (b"0\n1\nnull\n0\n0\n", 3),
    ],
)
def test_bad_lines_are_named(where, text, line):
    """A blank line or NA was a null read as -9223372036854775808 ("partition -9223372036854775808 is
    outside"), a byte that is not UTF-8 a raw UnicodeDecodeError."""
    _put(where, "paper.txt", text)
    assert _read(where, mentions=(f"line {line}:",)) is None


def test_one_line_without_newline(where):
    """pyarrow refuses a file of one short line without its newline; the line reader takes it."""
    _put(where, "paper.txt", b"0\n1\n2\n3\n1")
    assert _read(where)[0].tolist() == [0, 1, 2, 3, 1]
    for f in where.iterdir():
        f.unlink()
    (where / "paper.txt").write_bytes(b"3")
    got, err = assert_named_error(lambda: read_assignment(where, {"paper": 1}), where)
    assert err is None and got[0]["paper"].tolist() == [3]


ARRAYS = hnp.arrays(
    st.one_of(
        hnp.integer_dtypes(),
        hnp.unsigned_integer_dtypes(),
        hnp.floating_dtypes(),
        hnp.boolean_dtypes(),
        hnp.complex_number_dtypes(),
        hnp.unicode_string_dtypes(max_len=3),
        hnp.byte_string_dtypes(max_len=3),
        st.just(np.dtype([("a", "<i8")])),
        st.just(np.dtype("datetime64[s]")),
    ),
    st.sampled_from([(N,), (N - 1,), (N + 1,), (), (N, 1), (1, N), (0,)]),
)


@FUZZ
@given(ARRAYS, st.sampled_from([None, 2, 2**70]))
def test_npy_of_any_dtype_and_shape(where, arr, num_parts):
    _put(where, "paper.npy", _npy(arr))
    got = _read(where, num_parts if num_parts != 2**70 else None)
    if got is not None:
        assert np.issubdtype(arr.dtype, np.integer) and arr.shape == (N,)
        assert got[0].tolist() == arr.tolist()


@FUZZ
@given(PARTS.map(lambda p: _npy(np.array(p, dtype=np.int64))).flatmap(damaged))
def test_damaged_npy(where, data):
    _put(where, "paper.npy", data)
    got = _read(where, 8)
    if got is not None:
        assert got[0].min() >= 0


@pytest.mark.parametrize("what", ["objects", "npz", "empty", "huge_shape", "directory"])
def test_npy_that_is_not_an_array(where, what):
    """Pickled objects are never loaded; an empty file was a raw EOFError, a .npz archive an AttributeError,
    a header declaring 10**10 items a MemoryError."""
    _put(where, "paper.npy", None)
    path = where / "paper.npy"
    if what == "objects":
        path.write_bytes(_npy(np.array([0, None, 1, 1, 1], dtype=object)))
    elif what == "npz":
        np.savez(open(path, "wb"), a=np.zeros(N, np.int64))
    elif what == "empty":
        path.write_bytes(b"")
    elif what == "huge_shape":
        with open(path, "wb") as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": False, "shape": (10**10,)})
            f.write(np.zeros(N, np.int64).tobytes())
    else:
        path.mkdir()
    assert _read(where) is None
    if path.is_dir():
        path.rmdir()


@settings(FUZZ, max_examples=100)
@given(
    json_values() | st.dictionaries(st.sampled_from(["num_parts", "method", "version", "format"]), json_values()),
    st.booleans(),
)
def test_random_partition_meta(where, meta, as_bytes):
    doc = json.dumps(meta).encode()
    _put(where, "paper.txt", b"0\n1\n0\n1\n0\n", doc)
    got = _read(where)
    if got is not None:
        assert isinstance(meta, dict) and got[1] == meta["num_parts"]


@pytest.mark.parametrize(
    "doc",
    [
        nested(100_000).encode(),
        nested(100_000, '{"a":', "}").encode(),
        b"\xff",
        b"",
        b'{"num_parts": 1e400}',
        b'{"num_parts": NaN}',
        b'{"num_parts": 2, "method": 1}',
    ],
)
def test_bad_partition_meta(where, doc):
    _put(where, "paper.txt", b"0\n1\n0\n1\n0\n", doc)
    assert _read(where, mentions=(META_NAME,)) is None

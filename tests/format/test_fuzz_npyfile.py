"""Fuzzing the ``.npy`` files users hand over outside the dataset layouts: :func:`read_npy` itself, the
classes of ``--balance-ntypes FILE.npy`` (:func:`option_classes`) and the planner's edge counts read from
chunk headers. Arrays of any dtype and shape, pickled objects (never unpickled), ``.npz`` archives, empty
files, damaged headers and truncated data give the array saved or an :class:`InputError` naming the file."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from graphshard.errors import InputError
from graphshard.format.npyfile import read_npy
from graphshard.partition.balance import option_classes
from tests.fuzz_helpers import FUZZ, assert_named_error, damaged, no_writes

NTYPES, NUM_NODES = ["a", "b"], {"a": 4, "b": 3}


@pytest.fixture(scope="module")
def where(tmp_path_factory):
    return tmp_path_factory.mktemp("npy")


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
    hnp.datetime64_dtypes(),
    st.just(np.dtype([("a", "<i8"), ("b", "<f4")])),
)
ARRAYS = hnp.arrays(DTYPES, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=8))
VALID = hnp.arrays(st.sampled_from([np.int8, np.int64, np.uint32, np.uint64, bool]), 7)


def _header_damage(data: bytes) -> st.SearchStrategy[bytes]:
    """``data`` with its header text edited: a bracket, quote, comma or digit deleted, doubled or replaced."""
    end = data.index(b"\n") + 1

    def edit(args):
        i, how, c = args
        i = 10 + i % (end - 10)
        return data[:i] + (b"" if how == 0 else data[i : i + 1] * 2 if how == 1 else c) + data[i + 1 :]

    return st.tuples(
        st.integers(0, 200),
        st.integers(0, 2),
        st.sampled_from([b"(", b")", b"{", b"'", b",", b"9" * 20, b"-", b" ", b"\\", b"\x00"]),
    ).map(edit)


def _read(where, data: bytes):
    path = where / "x.npy"
    path.write_bytes(data)
    with no_writes(where):
        return assert_named_error(lambda: read_npy(path), path)


@FUZZ
@given(ARRAYS)
def test_any_plain_array_reads_back(where, arr):
    got, err = _read(where, _npy(arr))
    assert err is None, err
    assert got.dtype == arr.dtype and got.shape == arr.shape and got.tobytes() == arr.tobytes()


@FUZZ
@given(VALID.map(_npy).flatmap(lambda d: damaged(d) | _header_damage(d)))
def test_damaged_files(where, data):
    got, err = _read(where, data)
    if err is None:
        assert isinstance(got, np.ndarray) and got.dtype != object


@pytest.mark.parametrize(
    "what",
    [
        "objects",
        "object_field",
        "npz",
        "empty",
        "magic_only",
        "huge_shape",
        "unclosed",
        "pickle",
        "directory",
        "missing",
    ],
)
def test_what_is_not_an_array(where, what):
    """Each was a raw exception of np.load: EOFError (empty), tokenize.TokenError (an unclosed bracket in the
    header), MemoryError (a header declaring 10**10 items), or no array at all (a .npz archive)."""
    path = where / f"{what}.npy"
    if what == "objects":
        path.write_bytes(_npy(np.array([0, None], dtype=object)))
    elif what == "object_field":
        path.write_bytes(_npy(np.zeros(2, dtype=[("a", "O")])))
    elif what == "npz":
        np.savez(open(path, "wb"), a=np.zeros(3))
    elif what == "magic_only":
        path.write_bytes(b"\x93NUMPY")
    elif what == "huge_shape":
        with open(path, "wb") as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": False, "shape": (10**10,)})
            f.write(bytes(64))
    elif what == "unclosed":
        path.write_bytes(_npy(np.arange(5)).replace(b"(5,)", b"(5, ", 1))
    elif what == "pickle":
        path.write_bytes(b"\x80\x04K\x01.")  # pickle.dumps(1): np.load would unpickle it with allow_pickle
    elif what == "directory":
        path.mkdir(exist_ok=True)
    elif what in ("empty",):
        path.write_bytes(b"")
    _, err = assert_named_error(lambda: read_npy(path), path)
    assert isinstance(err, InputError)


def test_memory_mapped(where):
    path = where / "m.npy"
    path.write_bytes(_npy(np.arange(6, dtype=np.int32).reshape(2, 3)))
    got = read_npy(path, mmap=True)
    assert isinstance(got, np.memmap) and got.tolist() == [[0, 1, 2], [3, 4, 5]]


# -- --balance-ntypes FILE.npy -------------------------------------------------------------------------------------
@FUZZ
@given(ARRAYS | VALID | VALID.map(lambda a: a[:6]) | VALID.map(lambda a: np.concatenate([a, a[:1]])))
def test_balance_classes_file(where, arr):
    path = where / "classes.npy"
    path.write_bytes(_npy(arr))
    got, err = assert_named_error(lambda: option_classes(str(path), NTYPES, NUM_NODES, lambda t: None), path)
    if err is None:
        assert got.shape == (7,) and (np.issubdtype(got.dtype, np.integer) or got.dtype == bool)
        assert got.tolist() == arr.tolist()


@FUZZ
@given(VALID.map(_npy).flatmap(lambda d: damaged(d) | _header_damage(d)))
def test_balance_classes_damaged(where, data):
    path = where / "classes.npy"
    path.write_bytes(data)
    assert_named_error(lambda: option_classes(str(path), NTYPES, NUM_NODES, lambda t: None), path)


# -- the planner's edge counts from chunk headers ------------------------------------------------------------------
@pytest.fixture(scope="module")
def chunked(tmp_path_factory):
    from graphshard.chunked import read_metadata
    from graphshard.chunked.writer import chunk_graph
    from tests.graphs import small_homo

    d = tmp_path_factory.mktemp("chunked") / "g"
    chunk_graph(small_homo(), d, 2)
    return read_metadata(d)


@FUZZ
@given(st.data())
def test_planner_edge_counts(chunked, data):
    from graphshard.chunked.counts import _chunk_edges

    et = chunked.etypes[0]
    paths = chunked.edges[et].paths
    meta = chunked if not chunked.edge_chunk_counts else None
    if meta is None:
        pytest.skip("the metadata declares chunk counts: headers are not read")
    truth = _chunk_edges(meta, et)
    path = paths[data.draw(st.integers(0, len(paths) - 1))]
    original = path.read_bytes()
    try:
        path.write_bytes(data.draw(damaged(original) | st.just(b"") | ARRAYS.map(_npy)))
        got = _chunk_edges(meta, et)  # an estimate: never an error, the reader names a bad file later
        assert len(got) == len(truth) and all(isinstance(c, int) and c >= 0 for c in got)
    finally:
        path.write_bytes(original)


def test_a_header_written_by_python_2_reads_the_same_without_a_warning(where):
    """NumPy reads ``3L`` in a shape (Python 2's long integers) after a second parse, and warns that it did:
    the array is the same, so graphshard says nothing."""
    header = b"{'descr': '<i8', 'fortran_order': False, 'shape': (3L,), }"
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    path = where / "python2.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + np.arange(3).tobytes())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = read_npy(path)
    assert got.dtype == np.int64 and got.tolist() == [0, 1, 2]


def test_a_damaged_header_with_a_backslash_is_named_without_a_warning(where):
    """Python warns of an invalid escape while NumPy parses such a header; the error naming the file says all."""
    header = b"{'descr': '<i8\\q', 'fortran_order': False, 'shape': (3,), }"
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    path = where / "escape.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + np.arange(3).tobytes())
    with warnings.catch_warnings(record=True) as seen:  # recorded, not raised: an error would stop the parse
        warnings.simplefilter("always")
        with pytest.raises(InputError, match="escape.npy"):
            read_npy(path)
    assert [str(w.message) for w in seen] == []

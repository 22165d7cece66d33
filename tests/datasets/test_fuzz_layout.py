"""Fuzzing dataset directories (``meta.json`` and the ``.npy`` arrays of :mod:`graphshard.datasets.layout`):
any ``meta.json`` and any array in place of each file give the graph saved or an :class:`InputError` naming
the directory or file at fault, and reading writes nothing."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from graphshard.datasets import community_graph, load_dataset, save_dataset
from tests.fuzz_helpers import FUZZ, assert_named_error, damaged, json_values, no_writes

FILES = ["src.npy", "dst.npy", "feat.npy", "label.npy", "train_idx.npy", "val_idx.npy", "test_idx.npy"]
DTYPES = st.one_of(
    hnp.integer_dtypes(),
    hnp.unsigned_integer_dtypes(),
    hnp.floating_dtypes(),
    hnp.boolean_dtypes(),
    hnp.unicode_string_dtypes(max_len=2),
    hnp.datetime64_dtypes(),
)
ARRAYS = hnp.arrays(DTYPES, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=40))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("layout")
    save_dataset(community_graph(num_nodes=40, avg_degree=4, seed=1), root / "ok")
    return root, load_dataset(root / "ok").graph


def _fresh(root, name: str):
    d = root / "case"
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(root / "ok", d)
    return d, d / name


def _same_graph(got, want) -> None:
    """A dataset read after damage that still loads holds exactly the graph saved (for the untouched files)."""
    for a, b in zip(got.graph.edges[("_N", "_E", "_N")], want.edges[("_N", "_E", "_N")]):
        assert a.shape == b.shape


def _load(root, d, path):
    with no_writes(root / "ok"):
        return assert_named_error(lambda: load_dataset(d), path)


@FUZZ
@given(name=st.sampled_from(FILES), arr=ARRAYS)
def test_any_array_in_place_of_a_file(saved, name, arr):
    root, _ = saved
    d, path = _fresh(root, name)
    np.save(path, arr)
    got, err = _load(root, d, path)
    if err is None:  # accepted only when it is a fitting array: the reader checked shape and dtype
        g = got.graph
        assert g.num_nodes["_N"] == 40
        if name == "label.npy":
            assert np.array_equal(g.node_feats["_N"]["label"], arr)


@FUZZ
@given(name=st.sampled_from(FILES), data=st.data())
def test_damaged_bytes(saved, name, data):
    root, _ = saved
    d, path = _fresh(root, name)
    path.write_bytes(data.draw(damaged(path.read_bytes())))
    _load(root, d, path)


@FUZZ
@given(
    key=st.sampled_from(
        [
            "num_nodes",
            "feat_format",
            "feat_files",
            "feat_shape",
            "num_classes",
            "kind",
            "name",
            "node_types",
            "edge_types",
        ]
    ),
    value=json_values(),
)
def test_any_meta_value(saved, key, value):
    root, _ = saved
    d, path = _fresh(root, "meta.json")
    meta = json.loads(path.read_text())
    meta[key] = value
    path.write_text(json.dumps(meta))
    _load(root, d, d)


@FUZZ
@given(data=st.data())
def test_damaged_meta(saved, data):
    root, _ = saved
    d, path = _fresh(root, "meta.json")
    path.write_bytes(data.draw(damaged(path.read_bytes())))
    _load(root, d, d)


def test_a_pickle_is_never_loaded(saved):
    root, _ = saved
    d, path = _fresh(root, "label.npy")
    buf = io.BytesIO()
    np.save(buf, np.array([{"boom": 1}], dtype=object), allow_pickle=True)
    path.write_bytes(buf.getvalue())
    _, err = _load(root, d, path)
    assert err is not None

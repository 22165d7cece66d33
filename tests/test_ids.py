"""Homogeneous ⇄ heterogeneous ID conversion (property tests against a brute-force table)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graphshard import IDConverter, IDRangeError, InputError

counts = st.lists(st.integers(0, 30), min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(counts, st.data())
def test_node_round_trip_matches_table(cnts, data):
    conv = IDConverter({f"t{i}": c for i, c in enumerate(cnts)})
    table = [(t, i) for t, c in enumerate(cnts) for i in range(c)]  # homogeneous ID = position
    if not table:
        return
    homo = np.array(data.draw(st.lists(st.integers(0, len(table) - 1), max_size=20)), dtype=np.int64)
    t, p = conv.node_to_hetero(homo)
    assert [(int(a), int(b)) for a, b in zip(t, p)] == [table[h] for h in homo]
    for tid in set(t.tolist()):
        sel = t == tid
        assert np.array_equal(conv.node_to_homo(f"t{tid}", p[sel]), homo[sel])


def test_from_metadata_both_count_styles_and_tensors():
    meta = {
        "node_type": ["a", "b"],
        "num_nodes_per_type": [3, 4],
        "edge_type": ["a:r:b"],
        "num_edges_per_chunk": [[2, 3]],
    }
    conv = IDConverter.from_metadata(meta)
    out = conv.node_to_homo("b", torch.tensor([0, 3]))
    assert isinstance(out, torch.Tensor) and out.tolist() == [3, 6]
    assert conv.edge_to_hetero(np.array([4]))[1].tolist() == [4]
    with pytest.raises(IDRangeError, match="per-type ID 4 is out of range"):
        conv.node_to_homo("b", [4])
    with pytest.raises(IDRangeError, match="homogeneous ID 7"):
        conv.node_to_hetero([7])
    with pytest.raises(InputError, match="unknown node type"):
        conv.node_to_homo("c", [0])
    with pytest.raises(InputError, match="missing key 'node_type'"):
        IDConverter.from_metadata({})


def test_consecutive_finds_exact_runs_only():
    from graphshard.ids import consecutive

    assert consecutive(np.arange(5, 9)) == slice(5, 9)
    assert consecutive(np.array([7])) == slice(7, 8)
    for not_a_run in ([], [5, 7, 6], [5, 5, 7], [3, 5]):
        assert consecutive(np.array(not_a_run, dtype=np.int64)) is None


def test_uint64_ids_are_reported_as_given():
    conv = IDConverter({"a": 3, "b": 2})
    ids = np.array([0, 2**64 - 1], dtype=np.uint64)  # a cast to int64 would show -1
    for convert in (lambda: conv.node_to_homo("a", ids), lambda: conv.node_to_hetero(ids)):
        with pytest.raises(IDRangeError, match=r"^IDs: 18446744073709551615 at position 1 is out of range"):
            convert()
    assert conv.node_to_homo("b", np.array([1], dtype=np.uint64)).tolist() == [4]

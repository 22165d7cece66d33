"""Ownership, chunk shares, phases, and the node renumbering every rank holds."""

from __future__ import annotations

import numpy as np
import pytest

from graphshard.errors import InputError
from graphshard.pipeline.dispatch.state import DispatchState, chunk_share, owned_partitions, owner_rank, phase_groups
from tests.pipeline.dispatch.conftest import NEW2OLD, NODE_BOUNDS, one_rank


def test_partition_p_belongs_to_rank_p_mod_w():
    assert owned_partitions(7, 0, 3) == [0, 3, 6]
    assert owned_partitions(7, 2, 3) == [2, 5]
    assert owned_partitions(2, 3, 4) == []  # more ranks than partitions
    assert owner_rank(np.array([0, 1, 2, 3, 4, 5, 6]), 3).tolist() == [0, 1, 2, 0, 1, 2, 0]


def test_chunk_shares_are_contiguous_and_cover_every_chunk_once():
    assert [list(chunk_share(5, r, 2)) for r in range(2)] == [[0, 1], [2, 3, 4]]
    assert [list(chunk_share(2, r, 3)) for r in range(3)] == [[], [0], [1]]
    assert [list(chunk_share(7, r, 3)) for r in range(3)] == [[0, 1], [2, 3], [4, 5, 6]]


def test_phases_one_partition_per_rank_unless_deeper_halo():
    assert phase_groups(5, 2, 1) == [[0, 1], [2, 3], [4]]
    assert phase_groups(3, 4, 1) == [[0, 1, 2]]
    assert phase_groups(5, 2, 2) == [[0, 1, 2, 3, 4]]


def test_state_renumbers_nodes_like_the_hand_computed_expectation(tiny):
    s = DispatchState.load(tiny, one_rank(1, 2))
    assert (s.name, s.num_parts, s.num_nodes) == ("t", 2, 5)
    assert s.parts.tolist() == [1, 0, 1, 0, 1]
    assert s.new2old.tolist() == NEW2OLD
    assert s.old2new.tolist() == [2, 0, 3, 1, 4]
    assert s.node_bounds.tolist() == NODE_BOUNDS
    assert s.parts.dtype == s.new2old.dtype == s.old2new.dtype == np.int32  # narrow below 2**31 nodes
    assert s.part_starts().tolist() == [0, 2, 5]
    assert s.part_nodes(1) == (2, 5)
    assert s.edge_off.tolist() == [0, 4, 7]
    assert s.owned == [1] and s.mine([0, 1]) == [1]
    assert s.in_phase([1]).tolist() == [False, True]


def test_state_refuses_bad_hops_before_reading_anything(tiny, tmp_path):
    from dataclasses import replace

    with pytest.raises(InputError, match="num_hops must be an integer >= 1"):
        DispatchState.load(replace(tiny, num_hops=0, in_dir=tmp_path / "missing"), one_rank())

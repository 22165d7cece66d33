"""Planning: pieces of the chunk lists, and where every piece's edges land inside each partition."""

from __future__ import annotations

import numpy as np

from graphshard.pipeline.dispatch import plan as plan_module
from graphshard.pipeline.dispatch.plan import piece_rows, piece_starts, plan_edges, split_pieces
from graphshard.pipeline.dispatch.read import EdgeReader
from graphshard.pipeline.dispatch.state import DispatchState
from tests.pipeline.dispatch.conftest import EDGE_COUNTS


def test_pieces_split_chunks_and_follow_chunk_ownership():
    # chunks of 5, 0 and 7 rows; rank 0 reads chunk 0, rank 1 chunks 1 and 2; pieces of at most 4 rows
    got = split_pieces(np.array([0, 5, 5, 12]), 2, 4)
    assert got == [(0, 0, 4, 0), (0, 4, 5, 0), (1, 0, 0, 1), (2, 0, 4, 1), (2, 4, 7, 1)]
    assert split_pieces(np.array([0, 3, 6]), 3, 10) == [(0, 0, 3, 1), (1, 0, 3, 2)]  # rank 0 reads nothing
    assert split_pieces(np.array([0]), 2, 4) == []


def test_piece_rows_bound_the_bytes_in_flight_but_not_below_1024_rows():
    assert piece_rows(24) == (16 << 20) // 24
    assert piece_rows(1 << 30) == 1024
    assert piece_rows(0) == 16 << 20


def test_piece_starts_are_exclusive_prefix_sums_per_partition():
    per_piece = np.array([[2, 0, 1], [0, 3, 1], [4, 1, 0]])
    assert piece_starts(per_piece).tolist() == [[0, 0, 0], [2, 0, 1], [2, 3, 2]]


def test_plan_counts_edges_per_partition_and_places_each_piece(tiny, solo, monkeypatch):
    monkeypatch.setattr(plan_module, "piece_rows", lambda row_bytes: 1)  # one edge per piece
    state = DispatchState.load(tiny, solo)
    plan = plan_edges(state, EdgeReader(state.meta, state.node_off))
    assert plan.counts.tolist() == EDGE_COUNTS
    for r, num_edges in enumerate((4, 3)):
        assert plan.chunk_rows[r][[0, -1]].tolist() == [0, num_edges]
        rows = [(int(plan.chunk_rows[r][c]) + lo, hi - lo) for c, lo, hi, owner in plan.pieces[r] if hi > lo]
        assert rows == [(k, 1) for k in range(num_edges)]  # every edge once, in order
    # a:x:b edges go to partitions 1, 0, 1, 0: each one lands after the earlier ones of its partition
    nonempty = [j for j, (c, lo, hi, _) in enumerate(plan.pieces[0]) if hi > lo]
    assert plan.piece_base[0][nonempty].tolist() == [[0, 0], [0, 1], [1, 1], [1, 2]]
    nonempty = [j for j, (c, lo, hi, _) in enumerate(plan.pieces[1]) if hi > lo]  # b:y:a: partitions 1, 0, 1
    assert plan.piece_base[1][nonempty].tolist() == [[0, 0], [0, 1], [1, 1]]

"""Edge exchange: routing rows to ranks, placing received rows, and the edges each partition receives."""

from __future__ import annotations

import numpy as np

from graphshard.pipeline.dispatch import plan as plan_module
from graphshard.pipeline.dispatch.edge_exchange import PartEdges, gather_edges, place_block, split_by_rank
from graphshard.pipeline.dispatch.plan import plan_edges
from graphshard.pipeline.dispatch.read import EdgeReader
from graphshard.pipeline.dispatch.state import DispatchState


def test_split_by_rank_keeps_row_order_and_aligns_blocks():
    dest = np.array([1, 0, 1, 2, 1])
    triples = np.arange(15).reshape(5, 3)
    feats = np.array([0.5, 1.5, 2.5, 3.5, 4.5])
    got = split_by_rank(dest, [triples, feats], 4)
    assert [g[0][:, 0].tolist() for g in got] == [[3], [0, 6, 12], [9], []]
    assert [g[1].tolist() for g in got] == [[1.5], [0.5, 2.5, 4.5], [3.5], []]


def test_place_block_writes_rows_and_features_at_their_offsets():
    e = PartEdges(np.full(5, -1), np.full(5, -1), np.full(5, -1), {"t/w": np.zeros(3)})
    place_block(e, np.array([[7, 1, 2], [9, 3, 4]]), {"t/w": np.array([0.25, 0.75])}, at=3, feat_at=1)
    assert e.orig.tolist() == [-1, -1, -1, 7, 9]
    assert e.src.tolist() == [-1, -1, -1, 1, 3] and e.dst.tolist() == [-1, -1, -1, 2, 4]
    assert e.feats["t/w"].tolist() == [0.0, 0.25, 0.75]


def _gather(tiny, solo, monkeypatch, rows_per_piece):
    monkeypatch.setattr(plan_module, "piece_rows", lambda row_bytes: rows_per_piece)
    state = DispatchState.load(tiny, solo)
    reader = EdgeReader(state.meta, state.node_off)
    return gather_edges(state, plan_edges(state, reader), reader, [0, 1])


def test_partitions_receive_their_edges_in_new_id_order(tiny, solo, monkeypatch):
    for rows_per_piece in (1, 2, 1024):  # however the input is cut, the result is the same
        edges = _gather(tiny, solo, monkeypatch, rows_per_piece)
        assert sorted(edges) == [0, 1]
        # partition 0: a2->b0 (edge 1), a0->b0 (3), then b1->a1 (5); homogeneous node IDs
        assert edges[0].orig.tolist() == [1, 3, 5]
        assert edges[0].src.tolist() == [2, 0, 4] and edges[0].dst.tolist() == [3, 3, 1]
        assert edges[0].feats["a:x:b/w"].tolist() == [11.0, 13.0]
        assert edges[1].orig.tolist() == [0, 2, 4, 6]
        assert edges[1].src.tolist() == [0, 1, 3, 4] and edges[1].dst.tolist() == [4, 4, 0, 2]
        assert edges[1].feats["a:x:b/w"].tolist() == [10.0, 12.0]
        assert edges[1].orig.dtype == edges[1].src.dtype == np.int32  # narrow below 2**31


def test_only_the_phase_partitions_are_received(tiny, solo):
    state = DispatchState.load(tiny, solo)
    reader = EdgeReader(state.meta, state.node_off)
    edges = gather_edges(state, plan_edges(state, reader), reader, [1])
    assert list(edges) == [1] and edges[1].orig.tolist() == [0, 2, 4, 6]

"""Node data exchange: every owned partition gets its nodes' rows, by new ID."""

from __future__ import annotations

from graphshard.pipeline.dispatch import plan as plan_module
from graphshard.pipeline.dispatch.node_exchange import gather_node_feats
from graphshard.pipeline.dispatch.plan import NodeDataPlans
from graphshard.pipeline.dispatch.state import DispatchState


def test_node_rows_land_at_their_new_ids(tiny, solo, monkeypatch):
    monkeypatch.setattr(plan_module, "piece_rows", lambda row_bytes: 1)
    state = DispatchState.load(tiny, solo)
    plans = NodeDataPlans(state)
    # a's rows: a0 [0, 1], a1 [2, 3], a2 [4, 5]; partition 0 holds a1, partition 1 holds a0 then a2
    got = gather_node_feats(state, plans, [0, 1])
    assert got[0]["a/f"].tolist() == [[2.0, 3.0]]
    assert got[1]["a/f"].tolist() == [[0.0, 1.0], [4.0, 5.0]]
    assert set(got[0]) == {"a/f"}  # b has no data
    again = gather_node_feats(state, plans, [1])  # a later phase: only its partition
    assert list(again) == [1] and again[1]["a/f"].tolist() == [[0.0, 1.0], [4.0, 5.0]]

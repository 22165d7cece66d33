"""Own in-edges (CSC) and HALO in-edges, against the tiny graph worked out by hand (see conftest).

New edge IDs: partition 0 holds edges 1, 3, 5 as new 0, 1, 2; partition 1 holds 0, 2, 4, 6 as new 3-6.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from graphshard.partition.halo import OwnInEdges
from graphshard.pipeline.dispatch.edge_exchange import gather_edges
from graphshard.pipeline.dispatch.halo import expand_halo, halo_edges, own_structure, serve_in_edges
from graphshard.pipeline.dispatch.plan import plan_edges
from graphshard.pipeline.dispatch.read import EdgeReader
from graphshard.pipeline.dispatch.state import DispatchState


def _own(tiny, solo, hops):
    state = DispatchState.load(replace(tiny, num_hops=hops), solo)
    reader = EdgeReader(state.meta, state.node_off)
    edges = gather_edges(state, plan_edges(state, reader), reader, [0, 1])
    return state, edges, {p: own_structure(state, p, edges[p], base) for p, base in ((0, 0), (1, 3))}


def test_one_hop_csc_is_compact_and_releases_the_endpoints(tiny, solo):
    _, edges, own = _own(tiny, solo, 1)
    csc, orig = own[1]
    # inner nodes a0, a2, b1 (new 2, 3, 4): a0 <- b0 (edge 4), a2 <- b1 (6), b1 <- a0 (0), a1 (2)
    assert orig is None and csc.eid_base == 3
    assert csc.indptr.tolist() == [0, 1, 2, 4]
    assert csc.eids.tolist() == [2, 3, 0, 1]  # positions in the received arrays (orig 0, 2, 4, 6)
    assert csc.src.tolist() == [1, 4, 2, 0]  # new IDs of b0, b1, a0, a1
    assert edges[1].src.size == 0 and edges[1].dst.size == 0


def test_deeper_halo_keeps_absolute_and_original_edge_ids(tiny, solo):
    _, _, own = _own(tiny, solo, 2)
    csc, orig = own[1]
    assert csc.eids.tolist() == [5, 6, 3, 4] and orig.tolist() == [4, 6, 0, 2]


def test_two_hop_halo_holds_the_in_edges_of_the_outside_sources(tiny, solo):
    state, _, own = _own(tiny, solo, 2)
    halo = halo_edges(state, own)
    # partition 0's outside sources: a0, a2, b1 (new 2, 3, 4); their in-edges: a0 <- b0 (4),
    # a2 <- b1 (6), b1 <- a0 (0), a1 (2)
    h, orig = halo[0]
    assert h.halo_dsts.tolist() == [2, 3, 4] and h.degrees.tolist() == [1, 1, 2]
    assert h.eids.tolist() == [5, 6, 3, 4] and h.src.tolist() == [1, 4, 2, 0]
    assert orig.tolist() == [4, 6, 0, 2]
    # partition 1's outside sources: a1, b0 (new 0, 1): a1 <- b1 (5), b0 <- a2 (1), a0 (3)
    h, orig = halo[1]
    assert h.halo_dsts.tolist() == [0, 1] and h.degrees.tolist() == [1, 2]
    assert h.eids.tolist() == [2, 0, 1] and h.src.tolist() == [4, 3, 2]
    assert orig.tolist() == [5, 1, 3]


def test_one_hop_halo_is_empty(tiny, solo):
    state, _, own = _own(tiny, solo, 1)
    assert all(h.halo_dsts.size == 0 and orig.size == 0 for h, orig in halo_edges(state, own).values())


def test_serve_answers_in_the_order_asked_across_partitions():
    # partition 0: nodes 0-1, partition 1: nodes 2-4; CSCs over inner nodes with (new eid, src, original eid)
    own = {
        0: (OwnInEdges(np.array([0, 2, 3]), np.array([10, 11, 12]), np.array([3, 4, 2])), np.array([100, 101, 102])),
        1: (OwnInEdges(np.array([0, 0, 1, 3]), np.array([20, 21, 22]), np.array([0, 1, 0])), np.array([200, 201, 202])),
    }
    deg, rec = serve_in_edges(np.array([4, 0, 2, 3]), own, np.array([0, 2, 5]), np.array([[0, 2], [2, 5]]))
    assert deg.tolist() == [2, 2, 0, 1]
    assert rec.tolist() == [[21, 1, 201], [22, 0, 202], [10, 3, 100], [11, 4, 101], [20, 0, 200]]


def _table_fetch(table: dict[int, list[tuple[int, int, int]]], asked_log: list[list[int]]):
    """A fetch answering from a table node -> [(new eid, new src, original eid)], recording what is asked."""

    def fetch(nodes):
        asked_log.append(nodes.tolist())

        def lookup(asked):
            recs = [rec for n in asked.tolist() for rec in table[n]]
            cols = np.array(recs, dtype=np.int64).reshape(-1, 3)
            return np.array([len(table[n]) for n in asked.tolist()], np.int64), cols[:, 0], cols[:, 1], cols[:, 2]

        return lookup

    return fetch


def test_deeper_hops_follow_sources_back_and_group_by_destination():
    # a chain 0, 2 -> 1 -> 3 -> 4; the partition holds node 4 only, with its in-edge from 3
    table = {3: [(30, 1, 300)], 1: [(10, 0, 100), (11, 2, 101)], 0: [], 2: [(20, 4, 200)]}
    own = {0: (OwnInEdges(np.array([0, 1]), np.array([40]), np.array([3])), np.array([400]))}
    asked: list[list[int]] = []
    halo = expand_halo(own, np.array([[4, 5]]), 5, 3, fetch=_table_fetch(table, asked))
    assert asked == [[3], [1]]  # hop by hop; 0 and 2 are three hops away: not asked
    h, orig = halo[0]
    assert h.halo_dsts.tolist() == [1, 3] and h.degrees.tolist() == [2, 1]  # by destination, not by hop
    assert h.eids.tolist() == [10, 11, 30] and h.src.tolist() == [0, 2, 1] and orig.tolist() == [100, 101, 300]


def test_a_rank_without_partitions_still_takes_part_in_every_hop():
    asked: list[list[int]] = []
    assert expand_halo({}, np.zeros((0, 2), np.int64), 5, 3, fetch=_table_fetch({}, asked)) == {}
    assert asked == [[], []]

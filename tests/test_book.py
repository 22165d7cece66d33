"""The partition book against the written partitions and against brute-force tables."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graphshard import IDRangeError, RangePartitionBook, load_partition, load_partition_book, partition_graph
from graphshard.book import positions_by_part


def test_book_agrees_with_partitions(graph, tmp_path):
    partition_graph(graph, "g", 3, tmp_path, num_hops=2, part_method="metis")
    book = load_partition_book(tmp_path / "g.json")
    assert book.num_partitions() == 3 and book.ntypes == graph.ntypes
    assert book.canonical_etypes == graph.canonical_etypes
    for p in range(3):
        part = load_partition(tmp_path / "g.json", p)
        nid, ptype, orig = part.graph.ndata["_ID"], part.graph.ndata["_TYPE"], part.graph.ndata["orig_id"]
        assert torch.equal(book.nid2partid(nid), part.graph.ndata["part_id"])
        inner = part.graph.ndata["inner_node"]
        assert torch.equal(book.partid2nids(p), nid[inner])
        assert torch.equal(book.nid2localnid(nid[inner], p), torch.arange(int(inner.sum())))
        t, per = book.map_to_per_ntype(nid)
        assert torch.equal(t, ptype)
        for ti, tname in enumerate(graph.ntypes):
            sel = t == ti
            assert torch.equal(book.map_to_homo_nid(per[sel], tname), nid[sel])
            assert torch.equal(book.to_original(tname, per[sel]), orig[sel])
            assert torch.equal(book.from_original(tname, orig[sel]), per[sel])
            assert torch.equal(book.nid2partid(per[sel], tname), part.graph.ndata["part_id"][sel])
        eid, etype, eorig = part.graph.edata["_ID"], part.graph.edata["_TYPE"], part.graph.edata["orig_id"]
        assert torch.equal(
            book.eid2partid(eid[part.graph.edata["inner_edge"]]),
            torch.full((int(part.graph.edata["inner_edge"].sum()),), p),
        )
        et, eper = book.map_to_per_etype(eid)
        assert torch.equal(et, etype)
        for ri, ename in enumerate(graph.canonical_etypes):
            sel = et == ri
            assert torch.equal(book.map_to_homo_eid(eper[sel], ename), eid[sel])
            assert torch.equal(book.to_original_eids(ename, eper[sel]), eorig[sel])
        inner_e = eid[part.graph.edata["inner_edge"]].sort().values
        assert torch.equal(book.partid2eids(p), inner_e)


def test_out_of_range_raises(tmp_path):
    from tests.graphs import small_homo

    partition_graph(small_homo(), "g", 2, tmp_path, part_method="random")
    book = load_partition_book(tmp_path / "g.json")
    with pytest.raises(IDRangeError, match="ID 240"):
        book.nid2partid([0, 240])
    with pytest.raises(IDRangeError, match="ID -1"):
        book.map_to_per_ntype(torch.tensor([-1]))
    with pytest.raises(IDRangeError, match="partition ID 2"):
        book.partid2nids(2)
    with pytest.raises(IDRangeError, match="belongs to partition 1"):
        book.nid2localnid(book.partid2nids(1)[:1], 0)
    with pytest.raises(IDRangeError):
        book.to_original("_N", [240])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=3), min_size=1, max_size=4), st.data())
def test_book_matches_brute_force(sizes, data):
    """sizes[p][t]: nodes of type t in partition p. Compare every lookup with an explicit table."""
    num_types = min(len(s) for s in sizes)
    sizes = [s[:num_types] for s in sizes]
    ntypes = [f"t{i}" for i in range(num_types)]
    table, start = [], 0  # table[homo] = (partition, type, per-type ID)
    node_map = {t: np.zeros((len(sizes), 2), np.int64) for t in ntypes}
    typed_count = [0] * num_types
    for p, row in enumerate(sizes):
        for t, c in enumerate(row):
            node_map[ntypes[t]][p] = (start, start + c)
            table += [(p, t, typed_count[t] + i) for i in range(c)]
            typed_count[t] += c
            start += c
    if not table:
        return
    edge_map = {"t0:r:t0": np.zeros((len(sizes), 2), np.int64)}
    book = RangePartitionBook(len(sizes), ntypes, ["t0:r:t0"], node_map, edge_map=edge_map)
    ids = np.array(data.draw(st.lists(st.integers(0, len(table) - 1), min_size=1, max_size=15)))
    assert book.nid2partid(ids).tolist() == [table[i][0] for i in ids]
    t, per = book.map_to_per_ntype(ids)
    assert list(zip(t.tolist(), per.tolist())) == [table[i][1:] for i in ids]
    for i in ids:
        p, ti, pid = table[i]
        assert book.map_to_homo_nid([pid], ntypes[ti]).item() == i
        assert book.nid2partid([pid], ntypes[ti]).item() == p
    with pytest.raises(IDRangeError):
        book.nid2partid([len(table)])


def test_grouped_book_sees_consecutive_partitions_as_one(graph, tmp_path):
    """A process serving stored partitions 2q and 2q+1 sees partition q: checked against the written
    partitions (their part_id halved, their inner nodes and edges together)."""
    partition_graph(graph, "g", 4, tmp_path, part_method="random")
    stored = load_partition_book(tmp_path / "g.json")
    book = stored.grouped(2)
    assert book.num_partitions() == 2 and book.group == 2
    parts = [load_partition(tmp_path / "g.json", p) for p in range(4)]
    for q in range(2):
        pair = [parts[2 * q].graph, parts[2 * q + 1].graph]
        inner = torch.cat([g.ndata["_ID"][g.ndata["inner_node"]] for g in pair])
        assert torch.equal(book.partid2nids(q), inner)
        assert torch.equal(book.nid2localnid(inner, q), torch.arange(inner.shape[0]))
        assert torch.equal(book.nid2partid(inner), torch.full_like(inner, q))
        own_edges = torch.cat([g.edata["_ID"][g.edata["inner_edge"]] for g in pair])
        assert torch.equal(book.eid2partid(own_edges), torch.full_like(own_edges, q))
        assert torch.equal(torch.sort(book.partid2eids(q)).values, torch.sort(own_edges).values)
        t, per = stored.map_to_per_ntype(inner)
        assert torch.equal(torch.stack(book.map_to_per_ntype(inner)), torch.stack([t, per]))
        for ti, name in enumerate(graph.ntypes):
            typed = per[t == ti]  # the pair's nodes of one type: one run of per-type IDs
            assert torch.equal(book.partid2nids(q, name), typed)
            assert torch.equal(book.map_to_homo_nid(typed, name), inner[t == ti])
            assert torch.equal(book.nid2partid(typed, name), torch.full_like(typed, q))
            assert torch.equal(book.nid2localnid(typed, q, name), torch.arange(typed.shape[0]))
    with pytest.raises(IDRangeError):
        book.partid2nids(2)


@pytest.mark.parametrize("num_parts", [1, 3, 8, 9, 40])
def test_positions_by_part_lists_every_item_under_its_partition(num_parts):
    rng = np.random.default_rng(num_parts)
    parts = rng.integers(0, num_parts, 5000)
    parts[parts == num_parts // 2] = 0  # a partition no item belongs to is not listed
    got = positions_by_part(parts, num_parts)
    want = [(p, [i for i, q in enumerate(parts.tolist()) if q == p]) for p in range(num_parts)]
    assert [(p, pos.tolist()) for p, pos in got] == [(p, pos) for p, pos in want if pos]

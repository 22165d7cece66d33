"""node_split / edge_split: disjoint, complete, even, local-first — checked against the partition book."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphshard import InputError, RangePartitionBook
from graphshard.distributed.runtime.split import edge_split, node_split


def _book(sizes):
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    nm = {"_N": np.stack([bounds[:-1], bounds[1:]], axis=1)}
    em = {"_N:_E:_N": np.stack([bounds[:-1], bounds[1:]], axis=1)}
    return RangePartitionBook(len(sizes), ["_N"], ["_N:_E:_N"], nm, edge_map=em)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=4), st.integers(1, 3), st.data())
def test_split_properties(sizes, trainers, data):
    book = _book(sizes)
    n = sum(sizes)
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    world = len(sizes) * trainers
    owner = book.nid2partid(np.arange(n)).numpy()
    for even in (True, False):
        pieces = [node_split(mask, book, rank=r, world_size=world, force_even=even).numpy() for r in range(world)]
        allids = np.concatenate(pieces)
        assert sorted(allids.tolist()) == np.flatnonzero(mask).tolist()  # disjoint and complete
        if even:
            sizes_r = [len(p) for p in pieces]
            assert max(sizes_r) - min(sizes_r) <= 1
            quota = [mask.sum() * (r + 1) // world - mask.sum() * r // world for r in range(world)]
            for r, piece in enumerate(pieces):  # local-first: as many local nodes as the quota allows
                local = np.flatnonzero(mask & (owner == r // trainers))
                t = r % trainers
                share = len(local[len(local) * t // trainers : len(local) * (t + 1) // trainers])
                assert int((owner[piece] == r // trainers).sum()) >= min(quota[r], share)
        else:
            for r, piece in enumerate(pieces):
                assert (owner[piece] == r // trainers).all()


def test_edge_split_and_errors():
    book = _book([3, 5])
    mask = np.ones(8, dtype=bool)
    assert edge_split(mask, book, rank=1, world_size=2, force_even=False).tolist() == [3, 4, 5, 6, 7]
    assert edge_split(mask, book, rank=0, world_size=2).tolist() == [0, 1, 2, 7]  # rank 1 keeps its own 3..6
    with pytest.raises(InputError, match="one entry per node"):
        node_split(np.ones(3, bool), book, rank=0, world_size=2)
    with pytest.raises(InputError, match="multiple of the number of partitions"):
        node_split(mask, book, rank=0, world_size=3)
    with pytest.raises(InputError, match="pass rank and world_size"):
        node_split(mask, book)

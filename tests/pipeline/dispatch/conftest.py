"""A tiny hand-made graph (chunked, with its assignment) whose partitioning is worked out by hand below,
and a one-rank process group for the collective steps, in this process.

Node types ``a`` (3 nodes, homogeneous IDs 0-2) and ``b`` (2 nodes, IDs 3-4); assignment a: [1, 0, 1],
b: [0, 1]. New IDs order nodes by (partition, homogeneous ID): partition 0 holds a1, b0 (new 0, 1),
partition 1 holds a0, a2, b1 (new 2, 3, 4).

Edges of ``a:x:b`` (homogeneous edge IDs 0-3): a0->b1, a2->b0, a1->b1, a0->b0, with feature ``w`` =
10..13; of ``b:y:a`` (IDs 4-6): b0->a0, b1->a1, b1->a2. Partition 0 owns (in new-ID order) edges 1, 3, 5
(new 0-2); partition 1 owns 0, 2, 4, 6 (new 3-6).
"""

from __future__ import annotations

import datetime

import numpy as np
import pytest

from graphshard import Graph
from graphshard.chunked.writer import chunk_graph
from graphshard.distributed.ranks.context import DistContext
from graphshard.pipeline.assignment_files import write_assignment
from graphshard.pipeline.dispatch import DispatchOptions

X, Y = ("a", "x", "b"), ("b", "y", "a")
NEW2OLD = [1, 3, 0, 2, 4]
NODE_BOUNDS = [[0, 1, 2], [2, 4, 5]]
EDGE_COUNTS = [[2, 1], [2, 2]]  # (partition, edge type)


def tiny_graph() -> Graph:
    return Graph(
        {"a": 3, "b": 2},
        {X: (np.array([0, 2, 1, 0]), np.array([1, 0, 1, 0])), Y: (np.array([0, 1, 1]), np.array([0, 1, 2]))},
        node_feats={"a": {"f": np.arange(6, dtype=np.float32).reshape(3, 2)}},
        edge_feats={X: {"w": np.arange(10, 14, dtype=np.float64)}},
    )


@pytest.fixture
def tiny(tmp_path):
    """Options for dispatching the tiny graph (2 edge chunks, 2-hop HALO, original IDs saved)."""
    chunk_graph(tiny_graph(), tmp_path / "c", 2, "numpy", graph_name="t")
    write_assignment(tmp_path / "a", {"a": np.array([1, 0, 1]), "b": np.array([0, 1])}, 2, "explicit")
    return DispatchOptions(
        tmp_path / "c", tmp_path / "a", tmp_path / "out", 2, save_orig_nids=True, save_orig_eids=True
    )


@pytest.fixture
def solo():
    """A process group of this process alone (rank 0 of 1), torn down afterwards."""
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", store=dist.HashStore(), rank=0, world_size=1, timeout=datetime.timedelta(seconds=60)
    )
    try:
        yield DistContext(0, 1, None, 60.0)
    finally:
        dist.destroy_process_group()


def one_rank(rank: int = 0, world: int = 1) -> DistContext:
    """A context for the steps that do not communicate."""
    return DistContext(rank, world, None, 60.0)

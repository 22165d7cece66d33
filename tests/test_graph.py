"""Graph construction and validation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphshard import Graph, InputError


def test_from_arrays_infers_count_and_keeps_arrays():
    src, dst = np.array([0, 1, 2]), np.array([1, 2, 5])
    g = Graph.from_arrays(src, dst)
    assert g.num_nodes == {"_N": 6} and g.is_homogeneous and g.total_edges == 3
    assert g.edges[("_N", "_E", "_N")][0] is src  # int64 input is not copied


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: Graph.from_arrays([0, -1], [1, 1], 3), r"src ID -1 at position 1 is out of range"),
        (lambda: Graph.from_arrays([0, 1], [1, 3], 3), r"dst ID 3 at position 1 is out of range \[0, 3\)"),
        (lambda: Graph.from_arrays([0, 1], [1], 3), "src has 2 IDs but dst has 1"),
        (lambda: Graph.from_arrays([0.0, 1.0], [1, 1], 3), "must be integers"),
        (
            lambda: Graph.from_arrays([0, 1], [1, 1], 3, node_feats={"x": np.zeros((2, 2))}),
            r"_N/x: first dimension must be 3, got 2",
        ),
        (lambda: Graph.from_arrays([0, 1], [1, 1], 3, edge_feats={"w": np.zeros(5)}), "first dimension must be 2"),
        (lambda: Graph({"a": 2}, {("a", "r", "b"): ([0], [0])}), "unknown node type 'b'"),
        (lambda: Graph({"a": 2}, {"a:r": ([0], [0])}), "malformed canonical edge type"),
        (lambda: Graph({"a": -1}, {}), "non-negative integer"),
        (lambda: Graph({"a/b": 1}, {}), "without '/'"),
        (lambda: Graph({"a": 2}, {}, node_feats={"z": {"x": np.zeros(2)}}), "unknown node type 'z'"),
    ],
)
def test_validation_errors(make, match):
    with pytest.raises(InputError, match=match):
        make()


def test_from_pyg_data_collects_node_and_edge_attributes():
    from torch_geometric.data import Data

    data = Data(
        x=torch.randn(5, 2),
        y=torch.arange(5),
        train_mask=torch.ones(5, dtype=torch.bool),
        edge_index=torch.tensor([[0, 1, 2], [1, 2, 3]]),
        edge_attr=torch.randn(3, 4),
        weight=torch.ones(3),
    )
    g = Graph.from_pyg(data)
    assert g.num_nodes == {"_N": 5}
    assert set(g.node_feats["_N"]) == {"x", "y", "train_mask"}
    assert set(g.edge_feats[("_N", "_E", "_N")]) == {"edge_attr", "weight"}
    assert np.array_equal(g.edges[("_N", "_E", "_N")][1], [1, 2, 3])


def test_from_pyg_hetero_data():
    from torch_geometric.data import HeteroData

    data = HeteroData()
    data["paper"].x = torch.randn(4, 3)
    data["paper"].y = torch.arange(4)
    data["author"].num_nodes = 2
    data["author", "writes", "paper"].edge_index = torch.tensor([[0, 1, 1], [0, 2, 3]])
    data["author", "writes", "paper"].edge_attr = torch.randn(3, 2)
    g = Graph.from_pyg(data)
    assert g.num_nodes == {"paper": 4, "author": 2}
    assert set(g.node_feats) == {"paper"} and set(g.node_feats["paper"]) == {"x", "y"}
    assert set(g.edge_feats[("author", "writes", "paper")]) == {"edge_attr"}
    with pytest.raises(InputError, match="out of range"):
        data["author", "writes", "paper"].edge_index = torch.tensor([[0, 2], [0, 0]])
        Graph.from_pyg(data)


def test_uint64_ids_are_reported_as_given():
    src = np.array([0, 1, 2**64 - 1], dtype=np.uint64)  # a cast to int64 would show -1
    with pytest.raises(InputError, match=r"src ID 18446744073709551615 at position 2 is out of range \[0, 3\)"):
        Graph.from_arrays(src, np.array([1, 2, 0], dtype=np.uint64), num_nodes=3)
    g = Graph.from_arrays(np.array([0, 1], dtype=np.uint64), np.array([1, 2], dtype=np.uint64), num_nodes=3)
    assert all(a.dtype == np.int64 for a in g.edges[("_N", "_E", "_N")])

"""Small graphs with known structure, and the shared data directory (optional), for tests."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from graphshard import Graph
from graphshard.datasets import community_graph

# ../shared/data beside the repo, or where GRAPHSHARD_SHARED_DATA says (a machine the data was carried to)
SHARED_DATA = Path(os.environ.get("GRAPHSHARD_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")


def shared_dataset(name: str) -> Path:
    """Path of a dataset in ../shared/data, or skip the test when it is not there."""
    path = SHARED_DATA / name
    if not (path / "meta.json").is_file():
        pytest.skip(f"shared dataset {name} not available at {path}")
    return path


def small_hetero(seed: int = 0) -> Graph:
    """A heterogeneous graph with features on some types, an empty node type and an empty edge type."""
    rng = np.random.default_rng(seed)
    n = {"paper": 60, "author": 25, "venue": 3, "ghost": 0}

    def rel(s, d, m):
        pairs = np.unique(rng.integers(0, n[s], m) * n[d] + rng.integers(0, n[d], m))
        return pairs // n[d], pairs % n[d]

    edges = {
        ("author", "writes", "paper"): rel("author", "paper", 90),
        ("paper", "cites", "paper"): rel("paper", "paper", 150),
        ("paper", "published_in", "venue"): (np.arange(60), rng.integers(0, 3, 60)),
        ("venue", "hosts", "ghost"): (np.zeros(0, np.int64), np.zeros(0, np.int64)),
    }
    cites = len(edges[("paper", "cites", "paper")][0])
    return Graph(
        n,
        edges,
        node_feats={
            "paper": {"feat": rng.standard_normal((60, 5)).astype(np.float32), "label": rng.integers(0, 4, 60)},
            "author": {"emb": rng.standard_normal((25, 3))},
        },
        edge_feats={("paper", "cites", "paper"): {"weight": rng.random(cites).astype(np.float32)}},
    )


def sparse_hetero(seed: int = 0) -> Graph:
    """:func:`small_hetero` whose papers carry a 50-wide bag-of-words feature held as CSR (3 non-zeros a
    row on average, some rows empty)."""
    from graphshard.sparse import CSRRows

    g, rng = small_hetero(seed), np.random.default_rng(seed + 1)
    dense = np.where(rng.random((60, 50)) < 0.06, rng.integers(1, 6, (60, 50)), 0).astype(np.float32)
    rows, cols = np.nonzero(dense)
    csr = CSRRows(np.searchsorted(rows, np.arange(61)).astype(np.int64), cols.astype(np.int64), dense[rows, cols], 50)
    return Graph(g.num_nodes, g.edges, {**g.node_feats, "paper": {**g.node_feats["paper"], "bow": csr}}, g.edge_feats)


def small_homo(seed: int = 0) -> Graph:
    """A directed homogeneous graph with 4 planted communities, node and edge features."""
    ds = community_graph(num_nodes=240, num_classes=4, avg_degree=6, intra=0.9, feat_dim=4, seed=seed)
    src, dst = ds.graph.edges[("_N", "_E", "_N")]
    keep = np.random.default_rng(seed).random(len(src)) < 0.7  # make it directed: in- and out-edges differ
    g = ds.graph
    feats = dict(g.node_feats["_N"])
    return Graph.from_arrays(
        src[keep], dst[keep], 240, node_feats=feats, edge_feats={"w": np.arange(int(keep.sum()), dtype=np.float32)}
    )

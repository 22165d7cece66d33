"""A heterogeneous graph seen as one homogeneous edge list (type-major IDs), for assignment and relabelling."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

import numpy as np

from ..graph import Graph
from ..ids import type_offsets


@dataclass(frozen=True)
class HomoView:
    """Homogeneous view of a :class:`Graph`.

    Node ``i`` of type ``t`` has homogeneous ID ``node_offsets[t] + i``; edge ``j`` of edge type ``r``
    has homogeneous ID ``edge_offsets[r] + j``. ``src``/``dst`` hold homogeneous node IDs by
    homogeneous edge ID. For a homogeneous graph they are the graph's own arrays (no copy).
    """

    num_nodes: int
    node_offsets: np.ndarray
    edge_offsets: np.ndarray
    src: np.ndarray
    _: KW_ONLY
    dst: np.ndarray

    @property
    def num_edges(self) -> int:
        return int(self.src.shape[0])

    @property
    def num_etypes(self) -> int:
        return int(self.edge_offsets.shape[0] - 1)

    def node_types(self, homo_ids: np.ndarray) -> np.ndarray:
        """Node type ID of each homogeneous node ID."""
        return np.searchsorted(self.node_offsets, homo_ids, side="right") - 1

    def edge_types(self, homo_eids: np.ndarray) -> np.ndarray:
        """Edge type ID of each homogeneous edge ID."""
        if self.num_etypes <= 1:
            return np.zeros(homo_eids.shape[0], dtype=np.int64)  # one type: zero pages, no search
        return np.searchsorted(self.edge_offsets, homo_eids, side="right") - 1

    def per_type_eids(self, homo_eids: np.ndarray) -> np.ndarray:
        """Per-type edge ID of each homogeneous edge ID (the input itself when there is one type)."""
        if self.num_etypes <= 1:
            return homo_eids
        return homo_eids - self.edge_offsets[self.edge_types(homo_eids)]


def homogenize(g: Graph) -> HomoView:
    """Build the homogeneous view of ``g`` (edge types in ``g.canonical_etypes`` order)."""
    node_offsets = type_offsets([g.num_nodes[t] for t in g.ntypes])
    edge_offsets = type_offsets([g.num_edges(et) for et in g.canonical_etypes])
    ntype_id = {t: i for i, t in enumerate(g.ntypes)}
    if len(g.ntypes) == 1 and len(g.edges) == 1:
        src, dst = next(iter(g.edges.values()))
        return HomoView(int(node_offsets[-1]), node_offsets, edge_offsets, src, dst=dst)
    src = np.empty(int(edge_offsets[-1]), dtype=np.int64)
    dst = np.empty_like(src)
    for r, (et, (s, d)) in enumerate(g.edges.items()):
        lo, hi = edge_offsets[r], edge_offsets[r + 1]
        np.add(s, node_offsets[ntype_id[et[0]]], out=src[lo:hi])
        np.add(d, node_offsets[ntype_id[et[2]]], out=dst[lo:hi])
    return HomoView(int(node_offsets[-1]), node_offsets, edge_offsets, src, dst=dst)

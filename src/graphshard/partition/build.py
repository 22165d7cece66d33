"""Build the arrays of one partition: structure (graph.safetensors), inner features, original IDs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Graph, etype_str
from .halo import LocalStructure
from .homogenize import HomoView
from .relabel import Relabelling


@dataclass(frozen=True)
class PartitionArrays:
    """Everything written for one partition, as name → array dicts (keys as in DESIGN.md §3)."""

    graph: dict[str, np.ndarray]
    node_feats: dict[str, np.ndarray]
    edge_feats: dict[str, np.ndarray]
    orig_nids: dict[str, np.ndarray]
    orig_eids: dict[str, np.ndarray]


def structure_arrays(local: LocalStructure, view: HomoView, rl: Relabelling) -> dict[str, np.ndarray]:
    """The tensors of ``graph.safetensors`` for one partition."""
    orig_nodes = rl.new2old[local.node_ids]
    ntype = view.node_types(orig_nodes)
    orig_edges = rl.perm[local.eids]
    etype = view.edge_types(orig_edges)
    inner_node = np.zeros(local.node_ids.shape[0], dtype=bool)
    inner_node[: local.num_inner] = True
    inner_edge = np.zeros(local.eids.shape[0], dtype=bool)
    inner_edge[: local.num_inner_edges] = True
    return {
        "indptr": local.indptr,
        "indices": local.indices,
        "node/_ID": local.node_ids,
        "node/inner_node": inner_node,
        "node/orig_id": orig_nodes - view.node_offsets[ntype],
        "node/part_id": np.searchsorted(rl.part_starts(), local.node_ids, side="right") - 1,
        "node/_TYPE": ntype,
        "edge/_ID": local.eids,
        "edge/inner_edge": inner_edge,
        "edge/orig_id": orig_edges - view.edge_offsets[etype],
        "edge/_TYPE": etype,
    }


def inner_orig_ids(g: Graph, view: HomoView, rl: Relabelling, p: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Original per-type IDs of partition ``p``'s inner nodes and edges, keyed by (edge) type, new order."""
    nids = {}
    for t, name in enumerate(g.ntypes):
        lo, hi = rl.node_bounds[p, t], rl.node_bounds[p, t + 1]
        nids[name] = rl.new2old[lo:hi] - view.node_offsets[t]
    eids = {}
    for r, et in enumerate(g.canonical_etypes):
        lo, hi = rl.edge_bounds[p, r], rl.edge_bounds[p, r + 1]
        eids[etype_str(et)] = rl.perm[lo:hi] - view.edge_offsets[r]
    return nids, eids


def feature_arrays(g: Graph, orig_nids: dict[str, np.ndarray], orig_eids: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """Inner-node and inner-edge feature rows of one partition, keyed ``"<type>/<name>"``."""
    node_feats = {
        f"{t}/{name}": np.ascontiguousarray(arr[orig_nids[t]])
        for t, feats in g.node_feats.items()
        for name, arr in feats.items()
    }
    edge_feats = {
        f"{etype_str(et)}/{name}": np.ascontiguousarray(arr[orig_eids[etype_str(et)]])
        for et, feats in g.edge_feats.items()
        for name, arr in feats.items()
    }
    return node_feats, edge_feats

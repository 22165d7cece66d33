"""Split a sampler output over homogeneous IDs into per-type pieces (PyG's heterogeneous layout)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any

import numpy as np

from .neighbor import SamplerOutput


@dataclass(frozen=True)
class HeteroSamplerOutput:
    """Per node type: ``node`` (per-type IDs, seeds first), ``batch``; per edge type: ``row``/``col``
    (positions among the nodes of the source / destination type) and ``edge`` (per-type edge IDs);
    ``num_sampled_nodes``/``num_sampled_edges`` per type and hop. ``position``: where each node of the
    homogeneous output went within its type."""

    node: dict[str, np.ndarray]
    row: dict[Any, np.ndarray]
    col: dict[Any, np.ndarray]
    edge: dict[Any, np.ndarray]
    _: KW_ONLY
    batch: dict[str, np.ndarray] | None
    num_sampled_nodes: dict[str, list[int]]
    num_sampled_edges: dict[Any, list[int]]
    position: np.ndarray


def _hop_of(counts: list[int]) -> np.ndarray:
    return np.repeat(np.arange(len(counts)), counts)


def to_hetero(
    out: SamplerOutput,
    ntypes: list[str],
    node_type: np.ndarray,
    node_id: np.ndarray,
    *,
    etypes: list[Any],
    edge_type: np.ndarray,
    edge_id: np.ndarray,
) -> HeteroSamplerOutput:
    """Regroup ``out`` by type: ``node_type``/``node_id`` give each output node's type index and per-type
    ID, ``edge_type``/``edge_id`` each sampled edge's."""
    hops_n, hops_e = len(out.num_sampled_nodes), len(out.num_sampled_edges)
    node_hop, edge_hop = _hop_of(out.num_sampled_nodes), _hop_of(out.num_sampled_edges)
    position = np.empty(out.node.shape[0], dtype=np.int64)
    node: dict[str, np.ndarray] = {}
    batch: dict[str, np.ndarray] = {}  # per type when the sampler output has one (disjoint mode)
    n_nodes: dict[str, list[int]] = {}
    for i, t in enumerate(ntypes):
        sel = np.flatnonzero(node_type == i)
        position[sel] = np.arange(sel.shape[0])
        node[t] = node_id[sel]
        n_nodes[t] = np.bincount(node_hop[sel], minlength=hops_n).tolist()
        if out.batch is not None:
            batch[t] = out.batch[sel]
    row, col, edge, n_edges = {}, {}, {}, {}
    for r, et in enumerate(etypes):
        sel = np.flatnonzero(edge_type == r)
        row[et], col[et], edge[et] = position[out.row[sel]], position[out.col[sel]], edge_id[sel]
        n_edges[et] = np.bincount(edge_hop[sel], minlength=hops_e).tolist()
    return HeteroSamplerOutput(
        node,
        row,
        col,
        edge,
        batch=batch if out.batch is not None else None,
        num_sampled_nodes=n_nodes,
        num_sampled_edges=n_edges,
        position=position,
    )

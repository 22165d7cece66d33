"""Statistics of a partitioned graph, for ``graphshard inspect`` and benchmarks."""

from __future__ import annotations

import os
from dataclasses import KW_ONLY, asdict, dataclass

import numpy as np

from .format.config import read_config
from .format.load import load_partition


@dataclass(frozen=True)
class PartStats:
    part_id: int
    inner_nodes: int
    halo_nodes: int
    inner_edges: int
    _: KW_ONLY
    local_edges: int
    cut_edges: int
    node_feat_bytes: int
    edge_feat_bytes: int
    file_bytes: int


@dataclass(frozen=True)
class PartitioningStats:
    graph_name: str
    part_method: str
    num_parts: int
    halo_hops: int
    _: KW_ONLY
    num_nodes: int
    num_edges: int
    edge_cut: int
    edge_cut_fraction: float
    node_balance: float
    edge_balance: float
    replication_factor: float
    total_file_bytes: int
    parts: list[PartStats]

    def to_dict(self) -> dict:
        return asdict(self)


def _balance(values: list[int]) -> float:
    mean = float(np.mean(values)) if values else 0.0
    return float(max(values) / mean) if mean > 0 else 1.0


def partitioning_stats(part_config: str | os.PathLike, verify: bool = False) -> PartitioningStats:
    """Per-partition sizes and overall quality figures (edge cut, balance, replication) of a partitioning.

    The edge cut counts original edges whose endpoints are owned by different partitions.
    """
    cfg = read_config(part_config)
    parts = []
    for p in range(cfg.num_parts):
        part = load_partition(cfg.path, p, verify=verify)
        g = part.graph
        n_inner = g.num_inner_nodes
        inner_edge = g.edata["inner_edge"].numpy()
        cut = int((g.indices.numpy()[inner_edge] >= n_inner).sum())
        files = sum((cfg.root / rel).stat().st_size for rel in cfg.parts[p].values())
        parts.append(
            PartStats(
                part_id=p,
                inner_nodes=n_inner,
                halo_nodes=g.num_nodes - n_inner,
                inner_edges=int(inner_edge.sum()),
                local_edges=g.num_edges,
                cut_edges=cut,
                node_feat_bytes=sum(t.nbytes for t in part.node_feats.values()),
                edge_feat_bytes=sum(t.nbytes for t in part.edge_feats.values()),
                file_bytes=files,
            )
        )
    cut = sum(s.cut_edges for s in parts)
    return PartitioningStats(
        graph_name=cfg.graph_name,
        part_method=cfg.part_method,
        num_parts=cfg.num_parts,
        halo_hops=cfg.halo_hops,
        num_nodes=cfg.num_nodes,
        num_edges=cfg.num_edges,
        edge_cut=cut,
        edge_cut_fraction=cut / cfg.num_edges if cfg.num_edges else 0.0,
        node_balance=_balance([s.inner_nodes for s in parts]),
        edge_balance=_balance([s.inner_edges for s in parts]),
        replication_factor=sum(s.inner_nodes + s.halo_nodes for s in parts) / cfg.num_nodes if cfg.num_nodes else 0.0,
        total_file_bytes=sum(s.file_bytes for s in parts),
        parts=parts,
    )


def format_stats(st: PartitioningStats) -> str:
    """A human-readable table of :func:`partitioning_stats`."""
    head = [
        "part",
        "inner nodes",
        "HALO nodes",
        "inner edges",
        "local edges",
        "cut edges",
        "node feat MB",
        "edge feat MB",
        "files MB",
    ]
    rows = [
        [
            str(s.part_id),
            f"{s.inner_nodes:,}",
            f"{s.halo_nodes:,}",
            f"{s.inner_edges:,}",
            f"{s.local_edges:,}",
            f"{s.cut_edges:,}",
            f"{s.node_feat_bytes / 1e6:.2f}",
            f"{s.edge_feat_bytes / 1e6:.2f}",
            f"{s.file_bytes / 1e6:.2f}",
        ]
        for s in st.parts
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    lines = [
        f"graph {st.graph_name!r}: {st.num_nodes:,} nodes, {st.num_edges:,} edges, {st.num_parts} parts "
        f"({st.part_method}, {st.halo_hops}-hop HALO)",
        "  ".join(h.rjust(w) for h, w in zip(head, widths)),
    ]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    lines.append(
        f"edge cut {st.edge_cut:,} ({100 * st.edge_cut_fraction:.2f}% of edges); node balance "
        f"{st.node_balance:.3f}; edge balance {st.edge_balance:.3f}; replication factor "
        f"{st.replication_factor:.3f}; {st.total_file_bytes / 1e6:.1f} MB on disk"
    )
    return "\n".join(lines)

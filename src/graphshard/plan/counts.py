"""What the planner reads of a chunked graph: node and edge counts, the largest chunk, the size on disk, and
the adjacency entries expected (estimated from the first chunk)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..chunked.spec import ChunkedMeta


@dataclass(frozen=True)
class GraphCounts:
    """What the planner needs of a chunked graph."""

    nodes: int
    edges: int
    max_chunk_edges: int
    disk_bytes: int
    entries: int  # adjacency entries (2 × undirected edges) expected: 2 × edges less reverse pairs seen

    @classmethod
    def of(cls, meta: ChunkedMeta) -> "GraphCounts":
        counts = [c for et in meta.etypes for c in _chunk_edges(meta, et)]
        files = [p for s in meta.edges.values() for p in s.paths]
        files += [p for d in meta.node_data.values() for s in d.values() for p in s.paths]
        edges = sum(meta.num_edges.values())
        paired = _paired_fraction(meta)
        return cls(sum(meta.num_nodes.values()), edges, max(counts, default=0),
                   sum(os.path.getsize(p) for p in files if os.path.exists(p)), int(2 * edges * (1 - paired / 2)))


SAMPLE = 1 << 20


def _paired_fraction(meta: ChunkedMeta) -> float:
    """Share of the first edge chunk's first rows (up to :data:`SAMPLE`, same node types at both ends) whose
    reverse edge is among them: graphs stored with both directions have about half as many adjacency
    entries as their edge count suggests. Reverse edges elsewhere are not seen, so this errs low (a larger
    prediction)."""
    et = next((e for e in meta.etypes if e[0] == e[2] and meta.edges[e].paths), None)
    if et is None or meta.edges[et].format != "numpy":
        return 0.0
    from ..chunked.readers import read_edges

    try:
        src, dst = read_edges(meta.edges[et], 0)
    except (OSError, ValueError):
        return 0.0
    src, dst = np.asarray(src[:SAMPLE]), np.asarray(dst[:SAMPLE])
    keep = src != dst
    n = max(1, meta.num_nodes[et[0]])
    forward, backward = src[keep] * n + dst[keep], dst[keep] * n + src[keep]
    return float(np.isin(forward, backward).mean()) if forward.size else 0.0


def _chunk_edges(meta: ChunkedMeta, et: tuple[str, str, str]) -> list[int]:
    """Edges per chunk of ``et``: declared, read from NumPy headers, or shared by file size."""
    declared = (meta.edge_chunk_counts or {}).get(et)
    if declared:
        return list(declared)
    spec = meta.edges[et]
    if spec.format == "numpy":
        try:
            return [int(np.load(p, mmap_mode="r", allow_pickle=False).shape[0]) for p in spec.paths]
        except (OSError, ValueError):
            pass
    sizes = [os.path.getsize(p) if os.path.exists(p) else 0 for p in spec.paths]
    total = max(1, sum(sizes))
    return [-(-meta.num_edges[et] * s // total) for s in sizes]



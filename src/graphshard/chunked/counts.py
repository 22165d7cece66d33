"""What the cost models read of a chunked graph: node and edge counts, the largest chunk, the size on disk, and
the adjacency entries expected (estimated from the first chunk)."""

from __future__ import annotations

import os
from dataclasses import KW_ONLY, dataclass

import numpy as np

from ..errors import InputError
from ..format.npyfile import read_npy
from .readers import read_edges
from .spec import ChunkedMeta


@dataclass(frozen=True)
class GraphCounts:
    """What the cost models need of a chunked graph."""

    nodes: int
    edges: int
    max_chunk_edges: int
    disk_bytes: int
    _: KW_ONLY
    entries: int  # adjacency entries (2 × undirected edges) expected: 2 × edges less reverse pairs seen
    ordered: bool = False  # the node order carries locality (stream then coarsens), judged on the first chunk

    @classmethod
    def of(cls, meta: ChunkedMeta, shape: bool = True) -> GraphCounts:
        """The counts of ``meta``'s graph; ``shape=False`` skips reading the first chunk's rows (reverse pairs
        and node order then count as absent: upper bounds), which only the structure-reading methods need."""
        counts = [c for et in meta.etypes for c in _chunk_edges(meta, et)]
        files = [p for s in meta.edges.values() for p in s.paths]
        files += [p for d in meta.node_data.values() for s in d.values() for p in s.paths]
        edges = sum(meta.num_edges.values())
        paired, ordered = _sample_shape(meta) if shape else (0.0, False)
        return cls(
            sum(meta.num_nodes.values()),
            edges,
            max(counts, default=0),
            sum(os.path.getsize(p) for p in files if os.path.exists(p)),
            entries=int(2 * edges * (1 - paired / 2)),
            ordered=ordered,
        )


SAMPLE = 1 << 20


def _sample_shape(meta: ChunkedMeta) -> tuple[float, bool]:
    """From the first edge chunk's first rows (up to :data:`SAMPLE`, same node types at both ends): the share
    whose reverse edge is among them (graphs stored with both directions have about half as many adjacency
    entries as their edge count suggests; reverse edges elsewhere are not seen, so this errs low: a larger
    prediction), and whether 4 contiguous ID ranges cut under half of what random does (the streaming
    partitioner's test for locality in the node order)."""
    et = next((e for e in meta.etypes if e[0] == e[2] and meta.edges[e].paths), None)
    if et is None or meta.edges[et].format != "numpy":
        return 0.0, False
    try:
        src, dst = read_edges(meta.edges[et], 0)
    except (OSError, ValueError):
        return 0.0, False
    src, dst = np.asarray(src[:SAMPLE]), np.asarray(dst[:SAMPLE])
    keep = src != dst
    n = max(1, meta.num_nodes[et[0]])
    forward, backward = src[keep] * n + dst[keep], dst[keep] * n + src[keep]
    if not forward.size:
        return 0.0, False
    crossing = float(np.mean(src[keep] * 4 // n != dst[keep] * 4 // n))
    return float(np.isin(forward, backward).mean()), crossing < 0.5 * 0.75


def _chunk_edges(meta: ChunkedMeta, et: tuple[str, str, str]) -> list[int]:
    """Edges per chunk of ``et``: declared, read from NumPy headers, or shared by file size."""
    declared = (meta.edge_chunk_counts or {}).get(et)
    if declared:
        return list(declared)
    spec = meta.edges[et]
    if spec.format == "numpy":
        try:
            return [int(read_npy(p, mmap=True).shape[0]) for p in spec.paths]
        except (InputError, IndexError):  # unreadable (or 0-d): estimated from the sizes; the reader names it later
            pass
    sizes = [os.path.getsize(p) if os.path.exists(p) else 0 for p in spec.paths]
    total = max(1, sum(sizes))
    return [-(-meta.num_edges[et] * s // total) for s in sizes]

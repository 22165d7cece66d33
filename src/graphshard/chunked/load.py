"""Reading a chunked graph: per-chunk row offsets with count checks, validated edge chunks, whole graphs."""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..graph import EType, Graph, etype_str
from .readers import count_rows, explain_csv_rows, read_data, read_data_like, read_edges
from .spec import ChunkedMeta, FileSpec


def chunk_offsets(spec: FileSpec, declared_total: int, declared_chunks: list[int] | None, what: str) -> np.ndarray:
    """Row offsets of every chunk (len = chunks + 1), checked against the metadata's counts."""
    return checked_offsets(
        spec, [count_rows(spec, i) for i in range(len(spec.paths))], declared_total, declared_chunks, what=what
    )


def checked_offsets(
    spec: FileSpec, rows: list[int], declared_total: int, declared_chunks: list[int] | None, *, what: str
) -> np.ndarray:
    """Row offsets from counted chunk ``rows``, after checking them against the metadata's counts."""
    rows = [int(r) for r in rows]
    if declared_chunks is not None:
        if len(declared_chunks) != len(rows):
            raise InputError(
                f"{spec.declared}: metadata declares {len(declared_chunks)} chunks, {len(rows)} files given"
            )
        for i, (got, want) in enumerate(zip(rows, declared_chunks)):
            if got != want:
                raise InputError(
                    explain_csv_rows(spec, i) or f"{spec.paths[i]}: {got} rows, metadata declares {want} ({spec.where})"
                )
    if sum(rows) != declared_total:
        held = ", ".join(f"{p.name}: {r}" for p, r in zip(spec.paths[:4], rows))
        raise InputError(
            explain_csv_rows(spec)
            or f"{spec.declared}: chunks hold {sum(rows)} rows in all "
            f"({held}{', ...' if len(rows) > 4 else ''}), "
            f"but the metadata declares {declared_total} {what}"
        )
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(rows, out=offsets[1:])
    return offsets


def edge_offsets(meta: ChunkedMeta, et: EType) -> np.ndarray:
    chunks = meta.edge_chunk_counts[et] if meta.edge_chunk_counts else None
    return chunk_offsets(meta.edges[et], meta.num_edges[et], chunks, f"edges of type {etype_str(et)!r}")


def read_checked_edges(
    meta: ChunkedMeta, et: EType, i: int, rows: tuple[int, int] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Edge chunk ``i`` of ``et`` (or its rows ``[lo, hi)``) with every ID checked against its node
    type's count. NumPy chunks are memory-mapped, so reading a row range touches only those rows."""
    spec = meta.edges[et]
    src, dst = read_edges(spec, i)
    first = 0
    if rows is not None:
        first = rows[0]
        src, dst = src[rows[0] : rows[1]], dst[rows[0] : rows[1]]
    for ids, t, end in ((src, et[0], "source"), (dst, et[2], "destination")):
        n = meta.num_nodes[t]
        bad = (ids < 0) | (ids >= n)
        if bad.any():
            row = int(np.argmax(bad))
            raise InputError(
                f"{spec.paths[i]}, line {first + row + 1}: {end} ID {int(ids[row])} is out of range "
                f"[0, {n}) for node type {t!r} ({spec.where})"
            )
    return src, dst


def read_feature(spec: FileSpec, total: int, what: str) -> np.ndarray:
    """All rows of one feature, concatenated over its chunks; the row count must equal ``total``."""
    chunk_offsets(spec, total, None, what)
    first = np.asarray(read_data(spec, 0)) if spec.paths else np.zeros(0)
    parts = [first] + [np.asarray(read_data_like(spec, i, first.shape[1:])) for i in range(1, len(spec.paths))]
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def load_chunked_graph(meta: ChunkedMeta, features: bool = True) -> Graph:
    """The whole chunked graph in memory (``features=False`` reads the structure only)."""
    edges = {}
    for et in meta.etypes:
        edge_offsets(meta, et)
        pieces = [read_checked_edges(meta, et, i) for i in range(len(meta.edges[et].paths))]
        edges[et] = (
            np.concatenate([p[0] for p in pieces]) if pieces else np.zeros(0, np.int64),
            np.concatenate([p[1] for p in pieces]) if pieces else np.zeros(0, np.int64),
        )
    node_feats, edge_feats = {}, {}
    if features:
        node_feats = {
            t: {k: read_feature(s, meta.num_nodes[t], f"nodes of type {t!r}") for k, s in d.items()}
            for t, d in meta.node_data.items()
        }
        edge_feats = {
            et: {
                k: read_feature(
                    s,
                    meta.num_edges[et],
                    f"edges of type {etype_str(et)!r} (edge data must align with the edge chunks)",
                )
                for k, s in d.items()
            }
            for et, d in meta.edge_data.items()
        }
    return Graph(dict(meta.num_nodes), edges, node_feats, edge_feats)

"""Planning: split every chunk list into pieces (the unit read, routed and exchanged per round), count
each piece's edges per destination partition over all ranks, and derive from the counts the edge
bounds and where every piece's edges land inside each partition (so received rows are placed directly)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...chunked.load import checked_offsets
from ...chunked.readers import count_rows, read_data
from ...chunked.spec import FileSpec
from ...distributed.ranks.collectives import all_reduce_sum
from ...graph import etype_str
from .read import EdgeReader
from .state import DispatchState, chunk_share

PIECE_BYTES = 16 << 20  # bytes read, routed and exchanged per round: bounds the memory in flight
EDGE_ROW_BYTES = 24  # an exchanged edge: (original edge ID, src, dst) as int64
NODE_ROW_BYTES = 8  # an exchanged node ID

Piece = tuple[int, int, int, int]  # (chunk, lo, hi, owner rank): rows [lo, hi) of the chunk


def piece_rows(row_bytes: int) -> int:
    """Rows per piece for rows of ``row_bytes`` bytes: about ``PIECE_BYTES``, at least 1024."""
    return max(1024, PIECE_BYTES // max(1, row_bytes))


def row_bytes(spec: FileSpec) -> int:
    """Bytes of one row of a data file list (as stored in its chunk 0)."""
    sample = np.asarray(read_data(spec, 0)[:1]) if spec.paths else np.zeros((0,))
    return int(sample[:1].nbytes) if sample.shape[0] else sample.dtype.itemsize


def split_pieces(offsets: np.ndarray, world: int, rows_per_piece: int) -> list[Piece]:
    """``(chunk, lo, hi, owner rank)`` for every piece of at most ``rows_per_piece`` rows of every chunk, in
    chunk order (an empty chunk is one empty piece); chunk ``c`` belongs to the rank whose share holds it."""
    count = offsets.shape[0] - 1
    out = []
    for c in range(count):
        owner = next(r for r in range(world) if c in chunk_share(count, r, world))
        rows = int(offsets[c + 1] - offsets[c])
        for lo in range(0, max(rows, 1), rows_per_piece):
            out.append((c, lo, min(rows, lo + rows_per_piece), owner))
    return out


def piece_starts(per_piece: np.ndarray) -> np.ndarray:
    """(pieces, P): where each piece's edges start among its partition's edges of the type (pieces in order)."""
    return np.cumsum(per_piece, axis=0) - per_piece


def chunk_offsets(
    state: DispatchState, spec: FileSpec, total: int, what: str, *, declared: list[int] | None = None
) -> np.ndarray:
    """Row offsets of all chunks of ``spec``: each rank counts its own share, then the counts are summed."""
    counts = np.zeros(len(spec.paths), dtype=np.int64)
    for i in state.my_chunks(len(spec.paths)):
        counts[i] = count_rows(spec, i)
    counts = all_reduce_sum(state.ctx, counts, f"row counts of {spec.where}")
    return checked_offsets(spec, counts.tolist(), total, declared, what=what)


@dataclass
class EdgePlan:
    """Per edge type index ``r``: its chunks' row offsets, its pieces, and each piece's start per partition."""

    chunk_rows: dict[int, np.ndarray]
    pieces: dict[int, list[Piece]]
    piece_base: dict[int, np.ndarray]  # (pieces, P) start inside (partition, edge type)
    counts: np.ndarray  # (P, ET) edges per partition and edge type


def plan_edges(state: DispatchState, reader: EdgeReader) -> EdgePlan:
    """Count, over all ranks, every piece's edges per destination partition (a collective)."""
    meta, world, rank = state.meta, state.ctx.world_size, state.ctx.rank
    plan = EdgePlan({}, {}, {}, np.zeros((state.num_parts, len(meta.etypes)), dtype=np.int64))
    for r, et in enumerate(meta.etypes):
        declared = meta.edge_chunk_counts[et] if meta.edge_chunk_counts else None
        offsets = chunk_offsets(
            state, meta.edges[et], meta.num_edges[et], f"edges of type {etype_str(et)!r}", declared=declared
        )
        width = EDGE_ROW_BYTES + sum(row_bytes(f) for f in meta.edge_data.get(et, {}).values())
        pieces = split_pieces(offsets, world, piece_rows(width))
        per_piece = np.zeros((len(pieces), state.num_parts), dtype=np.int64)
        for j, (c, lo, hi, owner) in enumerate(pieces):
            if owner == rank:
                _, dst = reader.rows(r, et, c, lo, hi=hi)
                per_piece[j] = np.bincount(state.parts[dst], minlength=state.num_parts)
        per_piece = all_reduce_sum(state.ctx, per_piece, f"edge counts of {etype_str(et)!r}")
        plan.chunk_rows[r], plan.pieces[r], plan.piece_base[r] = offsets, pieces, piece_starts(per_piece)
        plan.counts[:, r] = per_piece.sum(axis=0)
    return plan


class NodeDataPlans:
    """Chunk offsets and pieces of every node feature, counted once (every rank asks in the same order)."""

    def __init__(self, state: DispatchState) -> None:
        self.state = state
        self._plans: dict[tuple[str, str], tuple[np.ndarray, list[Piece]]] = {}

    def get(self, t: str, name: str, spec: FileSpec) -> tuple[np.ndarray, list[Piece]]:
        if (t, name) not in self._plans:
            offsets = chunk_offsets(self.state, spec, self.state.meta.num_nodes[t], f"nodes of type {t!r}")
            pieces = split_pieces(offsets, self.state.ctx.world_size, piece_rows(NODE_ROW_BYTES + row_bytes(spec)))
            self._plans[(t, name)] = (offsets, pieces)
        return self._plans[(t, name)]

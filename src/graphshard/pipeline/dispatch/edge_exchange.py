"""Edge exchange: every rank reads its pieces of each edge type and sends each edge (with its edge data)
to the owner of its destination's partition, which places it at its final position: within a partition,
edges end up sorted by edge type, then original ID, i.e. in new-ID order."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...chunked.readers import read_data
from ...distributed.ranks.collectives import exchange
from ...graph import EType, etype_str
from .plan import EdgePlan
from .read import EdgeReader, aligned_edge_data, check_chunk_count
from .state import DispatchState


@dataclass
class PartEdges:
    """One owned partition's own edges, sorted by original homogeneous edge ID (= new-ID order)."""

    orig: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    feats: dict[str, np.ndarray] = field(default_factory=dict)  # "<etype>/<name>" -> rows (inner edges)


def split_by_rank(dest: np.ndarray, blocks: list[np.ndarray], world: int) -> list[list[np.ndarray]]:
    """Per rank ``d``: the rows of every block whose ``dest`` is ``d`` (in their order)."""
    out = []
    for d in range(world):
        sel = np.flatnonzero(dest == d)
        out.append([b[sel] for b in blocks])
    return out


def place_block(e: PartEdges, triples: np.ndarray, feats: dict[str, np.ndarray], at: int, *, feat_at: int) -> None:
    """Put received ``(eid, src, dst)`` rows at ``at`` in ``e``, and their feature rows at ``feat_at``."""
    n = triples.shape[0]
    e.orig[at : at + n], e.src[at : at + n], e.dst[at : at + n] = triples[:, 0], triples[:, 1], triples[:, 2]
    for key, rows in feats.items():
        e.feats[key][feat_at : feat_at + n] = rows


def gather_edges(state: DispatchState, plan: EdgePlan, reader: EdgeReader, phase: list[int]) -> dict[int, PartEdges]:
    """Receive the edges (and edge data) of this rank's partitions in ``phase`` (a collective)."""
    mine = state.mine(phase)
    edges = _allocate(state, plan, mine)
    base_of = {p: np.concatenate([[0], np.cumsum(plan.counts[p])]) for p in mine}
    in_phase = state.in_phase(phase)
    world, rank = state.ctx.world_size, state.ctx.rank
    for r, et in enumerate(state.meta.etypes):
        empty = _empty_blocks(state, plan, et, r, edges=edges)
        by_rank = [[j for j, pc in enumerate(plan.pieces[r]) if pc[3] == w] for w in range(world)]
        for k in range(max(len(b) for b in by_rank)):  # round k: every rank sends its k-th piece (or nothing)
            if k < len(by_rank[rank]):
                send = _route_piece(
                    state,
                    plan,
                    reader,
                    r,
                    et=et,
                    j=by_rank[rank][k],
                    in_phase=in_phase,
                    row_shapes=[b.shape[1:] for b in empty[1:]],
                )
            else:
                send = [list(empty) for _ in range(world)]
            got = [exchange(state.ctx, [s[i] for s in send], f"edges of {etype_str(et)!r}") for i in range(len(empty))]
            for sender in range(world):
                if k < len(by_rank[sender]):
                    _place(
                        state,
                        plan,
                        r,
                        et,
                        j=by_rank[sender][k],
                        blocks=[g[sender] for g in got],
                        edges=edges,
                        base_of=base_of,
                    )
    return edges


def _allocate(state: DispatchState, plan: EdgePlan, mine: list[int]) -> dict[int, PartEdges]:
    """Empty edge buffers of each partition (features are added per edge type)."""
    itype = np.int32 if state.num_nodes < 2**31 else np.int64
    etype_ = np.int32 if int(state.edge_off[-1]) < 2**31 else np.int64
    total = {p: int(plan.counts[p].sum()) for p in mine}
    return {
        p: PartEdges(np.empty(total[p], etype_), np.empty(total[p], itype), np.empty(total[p], itype)) for p in mine
    }


def _empty_blocks(
    state: DispatchState, plan: EdgePlan, et: EType, r: int, *, edges: dict[int, PartEdges]
) -> list[np.ndarray]:
    """Zero-row blocks [triples, feature rows...] of ``et`` (sent when this rank has no piece in a round);
    allocates the feature buffers of ``et`` in ``edges`` on the way."""
    empty = [np.zeros((0, 3), np.int64)]
    for name, fspec in state.meta.edge_data.get(et, {}).items():
        check_chunk_count(state.meta, et, fspec)
        sample = np.asarray(read_data(fspec, 0)[:0])
        empty.append(sample)
        for p, e in edges.items():
            e.feats[f"{etype_str(et)}/{name}"] = np.empty((int(plan.counts[p, r]), *sample.shape[1:]), sample.dtype)
    return empty


def _route_piece(
    state: DispatchState,
    plan: EdgePlan,
    reader: EdgeReader,
    r: int,
    *,
    et: EType,
    j: int,
    in_phase: np.ndarray,
    row_shapes: list[tuple[int, ...]],
) -> list[list[np.ndarray]]:
    """Per destination rank: [triples (eid, src, dst), feature rows...] of piece ``j``'s edges in the phase
    (``row_shapes``: of each edge data, in order)."""
    c, lo, hi, _ = plan.pieces[r][j]
    src, dst = reader.rows(r, et, c, lo, hi=hi)
    part = state.parts[dst]
    keep = np.flatnonzero(in_phase[part])
    start = plan.chunk_rows[r][c]
    eid = np.arange(start + lo, start + hi, dtype=np.int64)[keep] + state.edge_off[r]
    blocks = [np.stack([eid, src[keep], dst[keep]], axis=1)]
    want = int(plan.chunk_rows[r][c + 1] - start)
    for fspec, row_shape in zip(state.meta.edge_data.get(et, {}).values(), row_shapes):
        blocks.append(aligned_edge_data(fspec, c, row_shape, want)[lo:hi][keep])
    return split_by_rank(state.owner_rank(part[keep]), blocks, state.ctx.world_size)


def _place(
    state: DispatchState,
    plan: EdgePlan,
    r: int,
    et: EType,
    *,
    j: int,
    blocks: list[np.ndarray],
    edges: dict[int, PartEdges],
    base_of: dict[int, np.ndarray],
) -> None:
    """Write piece ``j``'s block received from one rank at its final position in each owned partition."""
    triples = blocks[0]
    if triples.shape[0] == 0:
        return
    keys = [f"{etype_str(et)}/{name}" for name in state.meta.edge_data.get(et, {})]
    part = state.parts[triples[:, 2]]
    for p, e in edges.items():
        sel = np.flatnonzero(part == p)
        if sel.size:
            fat = int(plan.piece_base[r][j, p])
            place_block(
                e, triples[sel], {k: b[sel] for k, b in zip(keys, blocks[1:])}, int(base_of[p][r]) + fat, feat_at=fat
            )

"""Node data exchange: every rank reads its pieces of each node feature and sends each row to the owner
of its node's partition, which stores it at the node's new ID."""

from __future__ import annotations

import numpy as np

from ...chunked.readers import read_data, read_data_like
from ...chunked.spec import FileSpec
from ...distributed.ranks.collectives import exchange
from .plan import NodeDataPlans, Piece
from .state import DispatchState


def gather_node_feats(state: DispatchState, plans: NodeDataPlans, phase: list[int]) -> dict[int, dict[str, np.ndarray]]:
    """Rows of every node feature for this rank's partitions in ``phase``, placed by new ID (a collective)."""
    mine, in_phase = state.mine(phase), state.in_phase(phase)
    world, rank = state.ctx.world_size, state.ctx.rank
    out: dict[int, dict[str, np.ndarray]] = {p: {} for p in mine}
    for ti, t in enumerate(state.meta.ntypes):
        for name, spec in state.meta.node_data.get(t, {}).items():
            offsets, pieces = plans.get(t, name, spec)
            sample = np.asarray(read_data(spec, 0)[:0])
            for p in mine:
                count = int(state.node_bounds[p, ti + 1] - state.node_bounds[p, ti])
                out[p][f"{t}/{name}"] = np.empty((count, *sample.shape[1:]), sample.dtype)
            by_rank = [[pc for pc in pieces if pc[3] == w] for w in range(world)]
            for k in range(max(len(b) for b in by_rank)):
                piece = by_rank[rank][k] if k < len(by_rank[rank]) else None
                ids, rows = _read_piece(state, spec, offsets, piece, ti=ti, in_phase=in_phase, sample=sample)
                dest = state.owner_rank(state.parts[ids])
                sel = [np.flatnonzero(dest == d) for d in range(world)]
                got_ids = exchange(state.ctx, [ids[s] for s in sel], f"node IDs of {t}/{name}")
                got_rows = exchange(state.ctx, [rows[s] for s in sel], f"node data {t}/{name}")
                for gi, gr in zip(got_ids, got_rows):
                    _place(state, out, f"{t}/{name}", ti, ids=gi, rows=gr)
    return out


def _read_piece(
    state: DispatchState,
    spec: FileSpec,
    offsets: np.ndarray,
    piece: Piece | None,
    *,
    ti: int,
    in_phase: np.ndarray,
    sample: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Homogeneous node IDs and rows of ``piece`` whose node lies in the phase (none without a piece)."""
    if piece is None:
        return np.zeros(0, np.int64), sample
    c, lo, hi, _ = piece
    homo = np.arange(offsets[c] + lo, offsets[c] + hi, dtype=np.int64) + state.node_off[ti]
    keep = np.flatnonzero(in_phase[state.parts[homo]])
    return homo[keep], np.asarray(read_data_like(spec, c, sample.shape[1:]))[lo:hi][keep]


def _place(
    state: DispatchState, out: dict[int, dict[str, np.ndarray]], key: str, ti: int, *, ids: np.ndarray, rows: np.ndarray
) -> None:
    """Store received rows of nodes ``ids`` (homogeneous original IDs, of type ``ti``) by new ID."""
    part = state.parts[ids]
    for p, feats in out.items():
        s = np.flatnonzero(part == p)
        feats[key][state.old2new[ids[s]] - state.node_bounds[p, ti]] = rows[s]

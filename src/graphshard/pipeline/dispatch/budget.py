"""The memory check of dispatch: after the first pass has counted every partition's edges, and before any
data moves, refuse a run whose ranks on this machine are predicted to need more memory than allowed."""

from __future__ import annotations

import os

import numpy as np

from ...errors import InputError
from ...memory import Estimate, allowed, gib
from .cost import dispatch_estimates
from .plan import EdgePlan, row_bytes
from .state import DispatchState


def predicted_peaks(state: DispatchState, plan: EdgePlan) -> list[Estimate]:
    """Each rank's :class:`~graphshard.memory.Estimate` from the counted edges and the assignment's nodes."""
    meta = state.meta
    node_row = np.array(
        [sum(row_bytes(s) for s in meta.node_data.get(t, {}).values()) for t in meta.ntypes], dtype=np.int64
    )
    edge_row = np.array(
        [sum(row_bytes(s) for s in meta.edge_data.get(et, {}).values()) for et in meta.etypes], dtype=np.int64
    )
    feature_bytes = np.diff(state.node_bounds, axis=1) @ node_row + plan.counts @ edge_row
    return dispatch_estimates(
        state.num_nodes, plan.counts.sum(axis=1), feature_bytes, state.ctx.world_size, state.opts.num_hops
    )


def check_memory(state: DispatchState, plan: EdgePlan) -> None:
    """Raise :class:`InputError` (on every rank alike) when the ranks sharing this machine are predicted to
    need more than ``opts.memory`` bytes (default: the machine's memory) together."""
    peaks = predicted_peaks(state, plan)
    world, rank = state.ctx.world_size, state.ctx.rank
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    first = rank - int(os.environ.get("LOCAL_RANK", rank))
    here = peaks[first : first + local]
    budget = allowed(state.opts.memory)
    need = sum(e.peak_bytes for e in here)
    if budget and need > budget:
        worst = max(here, key=lambda e: e.peak_bytes)
        raise InputError(
            f"dispatch is predicted to need {gib(need)} on this machine ({len(here)} ranks; "
            f"{worst.method} {gib(worst.peak_bytes)} while {worst.phase}), more than the "
            f"{gib(budget)} allowed (--memory); use more machines, or an assignment with "
            "balanced edges (assign --balance-edges)"
        )

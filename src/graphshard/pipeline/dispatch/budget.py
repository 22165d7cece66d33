"""The memory and disk checks of dispatch: after the first pass has counted every partition's edges, and before any
data moves, refuse a run whose ranks on this machine are predicted to need more memory than allowed, or whose
partitions written on this machine are predicted not to fit the free space of ``--out``."""

from __future__ import annotations

import os

import numpy as np

from ...disk import check_disk
from ...errors import InputError
from ...memory import Estimate, allowed, gib
from .cost import dispatch_disk, dispatch_estimates
from .plan import EdgePlan, row_bytes
from .state import DispatchState


def feature_bytes(state: DispatchState, plan: EdgePlan) -> np.ndarray:
    """Bytes of every partition's inner node and edge rows (the features it writes)."""
    meta = state.meta
    node_row = np.array(
        [sum(row_bytes(s) for s in meta.node_data.get(t, {}).values()) for t in meta.ntypes], dtype=np.int64
    )
    edge_row = np.array(
        [sum(row_bytes(s) for s in meta.edge_data.get(et, {}).values()) for et in meta.etypes], dtype=np.int64
    )
    return np.diff(state.node_bounds, axis=1) @ node_row + plan.counts @ edge_row


def predicted_peaks(state: DispatchState, plan: EdgePlan) -> list[Estimate]:
    """Each rank's :class:`~graphshard.memory.Estimate` from the counted edges and the assignment's nodes."""
    return dispatch_estimates(
        state.num_nodes,
        plan.counts.sum(axis=1),
        feature_bytes(state, plan),
        state.ctx.world_size,
        num_hops=state.opts.num_hops,
    )


def local_ranks(state: DispatchState) -> range:
    """The ranks sharing this machine (torchrun's ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE``; all without them)."""
    world, rank = state.ctx.world_size, state.ctx.rank
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    first = rank - int(os.environ.get("LOCAL_RANK", rank))
    return range(first, first + local)


def check_disk_space(state: DispatchState, plan: EdgePlan) -> None:
    """Raise :class:`InputError` (on every rank alike) when the partitions the ranks on this machine write are
    predicted not to fit the free space of ``--out`` (partitions an interrupted run finished are reused: not
    counted); skipped with ``opts.check_disk`` False."""
    if not state.opts.check_disk:
        return
    here = local_ranks(state)
    resume = state.out / f".dispatch-{state.name}"
    mine = [
        p
        for p in range(state.num_parts)
        if p % state.ctx.world_size in here and not (resume / f"part{p}.done.json").is_file()
    ]
    nodes = np.diff(state.node_bounds, axis=1).sum(axis=1)
    edges = plan.counts.sum(axis=1)
    need = dispatch_disk(
        state.out,
        state.num_nodes,
        int(state.edge_off[-1]),
        nodes[mine].tolist(),
        part_edges=edges[mine].tolist(),
        feature_bytes=int(feature_bytes(state, plan)[mine].sum()),
        num_hops=state.opts.num_hops,
        orig_nids=state.opts.save_orig_nids,
        orig_eids=state.opts.save_orig_eids,
    )
    check_disk(need, hint=" (--out)")


def check_memory(state: DispatchState, plan: EdgePlan) -> None:
    """Raise :class:`InputError` (on every rank alike) when the ranks sharing this machine are predicted to
    need more than ``opts.memory`` bytes (default: the machine's memory) together."""
    ranks = local_ranks(state)
    here = predicted_peaks(state, plan)[ranks.start : ranks.stop]
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

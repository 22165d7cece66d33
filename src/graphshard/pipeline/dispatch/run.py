"""Running dispatch on one rank: prepare the output directory, plan, then exchange, build and write phase
by phase, then publish; :func:`run_dispatch` starts the ranks (or joins a torchrun job)."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import numpy as np

from ...chunked.spec import read_metadata
from ...distributed.ranks.collectives import barrier
from ...distributed.ranks.context import DistContext
from ...distributed.ranks.launcher import launch
from ...distributed.transport.liveness import doing
from ...format.feat_dtype import check_feat_dtype
from ...format.outputs import check_output_dir, claim_for_graph, prepare_output_dir
from ...partition.homogenize import HomoView
from ...partition.relabel import Relabelling, edge_bounds_from_counts
from ...progress import PhaseTimer, peak_rss_bytes
from .budget import check_disk_space, check_memory
from .edge_exchange import PartEdges, gather_edges
from .halo import halo_edges, own_structure
from .node_exchange import gather_node_feats
from .plan import NodeDataPlans, plan_edges
from .publish import config_template, publish
from .read import EdgeReader
from .resume import ResumeArea, input_fingerprint
from .state import DispatchOptions, DispatchState
from .write import PartWriter

log = logging.getLogger(__name__)


def dispatch(opts: DispatchOptions, ctx: DistContext) -> Path:
    """Run the dispatch step on this rank (all ranks call it). Returns the config JSON path."""
    state = DispatchState.load(opts, ctx)
    timer = PhaseTimer(total=2 + 2 * len(state.phases()), logger=log, desc=f"dispatch rank {ctx.rank}")
    doing("dispatch: planning")
    try:
        with timer.phase(f"rank {ctx.rank} plan (count edges per piece)"):
            reader = EdgeReader(state.meta, state.node_off)
            plan = plan_edges(state, reader)
            check_memory(state, plan)  # refused here, before the output is touched or any data moves
            check_disk_space(state, plan)
        resume = ResumeArea(state.out / f".dispatch-{state.name}", input_fingerprint(opts, state.meta))
        config_path = _prepare_output(state, resume)
        rl = Relabelling(
            state.num_parts,
            state.new2old,
            state.old2new,
            np.zeros(0, np.int64),
            node_bounds=state.node_bounds,
            edge_bounds=edge_bounds_from_counts(plan.counts),
        )
        writer = PartWriter(state, resume, config_template(state, rl, config_path))
        node_plans = NodeDataPlans(state)
        phases = state.phases()
        for n, phase in enumerate(phases, 1):
            doing(f"dispatch: exchanging edges and features (phase {n} of {len(phases)})")
            with timer.phase(f"rank {ctx.rank} exchange"):
                edges = gather_edges(state, plan, reader, phase)
                node_feats = gather_node_feats(state, node_plans, phase)
            doing(f"dispatch: building and writing partitions (phase {n} of {len(phases)})")
            with timer.phase(f"rank {ctx.rank} build + write"):
                _build_and_write(state, writer, rl, edges, node_feats=node_feats)
        doing("dispatch: waiting for every partition to be written")
        with timer.phase(f"rank {ctx.rank} wait for all partitions"):
            barrier(ctx, "partitions written")
    finally:
        timer.close()
    publish(state, resume, writer.identity)
    log.info("rank %d done: peak RSS %d bytes", ctx.rank, peak_rss_bytes())
    return config_path


def _prepare_output(state: DispatchState, resume: ResumeArea) -> Path:
    """Check and claim the output directory (every rank checks before any rank writes), clear this rank's
    stale staging and any config; returns the config path."""
    ctx, out, overwrite = state.ctx, state.out, state.opts.overwrite
    check_output_dir(out, "partitions", overwrite)
    if not overwrite:
        claim_for_graph(out, state.name, overwrite=False)
    barrier(ctx, "output checked")
    prepare_output_dir(out, "partitions", overwrite=True)
    claim_for_graph(out, state.name, overwrite)
    resume.root.mkdir(exist_ok=True)
    resume.clear_stale_staging(state.owned)
    config_path = out / f"{state.name}.json"
    config_path.unlink(missing_ok=True)  # from here on, nothing here may look complete
    barrier(ctx, "start")
    return config_path


def _build_and_write(
    state: DispatchState,
    writer: PartWriter,
    rl: Relabelling,
    edges: dict[int, PartEdges],
    *,
    node_feats: dict[int, dict[str, np.ndarray]],
) -> None:
    """Write the partitions of one phase (those finished by an earlier run are kept), releasing their data."""
    rank = state.ctx.rank
    skip = {p for p in edges if writer.resume.reusable(p, rank)}
    try:
        sums = {p: writer.write_features(p, edges[p], rl, node_feats.pop(p)) for p in sorted(edges) if p not in skip}
        node_feats.clear()
        own = {p: own_structure(state, p, edges[p], int(rl.edge_bounds[p, 0])) for p in edges}  # deeper HALOs serve all
        halo = halo_edges(state, own)  # collective: fails at once when a peer failed
        view = HomoView(
            state.num_nodes, state.node_off, state.edge_off, np.zeros(0, np.int64), dst=np.zeros(0, np.int64)
        )
        for p in sorted(edges):
            if p not in skip:
                writer.write_structure(p, edges[p], rl, view, own=own.pop(p), halo=halo.pop(p), sums=sums[p])
            log.info("rank %d: partition %d ready", rank, p)
    except BaseException:  # half-written partitions of this phase are not left behind (finished ones are kept)
        for p in edges:
            shutil.rmtree(writer.resume.staging_dir(p), ignore_errors=True)
        raise
    edges.clear()


def _worker(opts: DispatchOptions, timeout: float, log_level: int, heartbeat_timeout: float | None = None) -> None:
    logging.basicConfig(level=log_level, format=f"%(asctime)s rank {os.environ.get('RANK')} %(levelname)s: %(message)s")
    with DistContext.from_env(timeout, heartbeat_timeout) as ctx:
        dispatch(opts, ctx)


def run_dispatch(
    opts: DispatchOptions,
    num_procs: int | None = None,
    timeout: float = 300.0,
    host: str = "127.0.0.1",
    *,
    heartbeat_timeout: float | None = None,
) -> Path:
    """Run dispatch: start ``num_procs`` local ranks, or (None) join as one rank of a torchrun (or srun, or
    PyTorchJob) job. ``heartbeat_timeout``: see :mod:`graphshard.distributed.transport.liveness`."""
    level = logging.getLogger("graphshard").getEffectiveLevel()
    check_feat_dtype(opts.feat_dtype)
    if not opts.overwrite:  # a refusal is reported before any process starts
        claim_for_graph(check_output_dir(opts.out_dir, "partitions"), read_metadata(opts.in_dir).graph_name, False)
    if num_procs is None:
        _worker(opts, timeout, level, heartbeat_timeout)
    else:
        launch(_worker, num_procs, (opts, timeout, level, heartbeat_timeout), host=host, timeout=timeout)
    return Path(opts.out_dir).resolve() / f"{read_metadata(opts.in_dir).graph_name}.json"

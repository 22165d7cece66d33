"""The planner's answers as text (``graphshard plan``), from the cost model each step owns."""

from __future__ import annotations

from pathlib import Path

from ..chunked.counts import GraphCounts
from ..chunked.spec import read_metadata
from ..format.config import read_config
from ..memory import Estimate, gib
from ..partition.cost import dataset_counts, partition_estimates
from ..pipeline.assign_cost import choose, estimates
from ..pipeline.dispatch.cost import counted_estimates
from ..train.cost import feature_width, train_estimates


def process_table(title: str, per_process: list[Estimate], budget: int) -> str:
    """One line per process (peak private memory, memory-mapped files, phase) and the total against ``budget``."""
    lines = [title, f"{'process':<10} {'peak memory':>12} {'mapped files':>13}  peak phase"]
    for e in per_process:
        lines.append(f"{e.method:<10} {gib(e.peak_bytes):>12} {gib(e.mapped_bytes):>13}  {e.phase}")
    total = sum(e.peak_bytes for e in per_process)
    verdict = "fits" if not budget or total <= budget else "does NOT fit"
    lines.append(f"together {gib(total)} on one machine: {verdict} the budget of {gib(budget)}")
    return "\n".join(lines)


def plan_report(
    dataset: str | None,
    part_config: str | None,
    assignment: str | None,
    num_parts: int,
    procs: int,
    budget: int,
    memory_mb: int = 1024,
    hidden: int = 64,
    sampled_eval: bool = False,
) -> str:
    """``graphshard plan``: assignment methods and dispatch ranks for a chunked ``dataset``, or training
    processes for the partitions at ``part_config``."""
    if dataset and not (Path(dataset) / "metadata.json").is_file():  # a dataset partitioned in memory
        return method_table(dataset, partition_estimates(dataset, num_parts), budget)
    if dataset:
        counts = GraphCounts.of(read_metadata(dataset))
        ranks, counted = counted_estimates(dataset, assignment, num_parts, procs)
        how = f"partitions counted from {assignment}" if counted else f"{num_parts} partitions assumed even"
        return (
            table(counts, estimates(counts, num_parts, memory_mb), budget)
            + "\n\n"
            + process_table(f"dispatch on {procs} ranks ({how}):", ranks, budget)
        )
    assert part_config is not None  # given when dataset is not (graphshard plan takes exactly one of them)
    cfg = read_config(part_config)
    width = feature_width(cfg) or hidden  # featureless types learn inputs of --embed-dim (--hidden by default)
    per = train_estimates(cfg, procs, width, hidden, not sampled_eval)
    return process_table(
        f"train on {procs} processes x {cfg.num_parts} partitions ({width} input columns, hidden "
        f"{hidden}, {'sampled' if sampled_eval else 'layer-wise'} evaluation):",
        per,
        budget,
    )


def method_table(dataset: str, options: list[Estimate], budget: int) -> str:
    """``graphshard partition`` (in memory) per method: predicted peak, fit, recommendation."""
    nodes, edges, data = dataset_counts(dataset)
    lines = [
        f"graphshard partition (in memory): {nodes:,} nodes, {edges:,} edges, {data / 2**30:.2f} GiB of arrays; "
        f"budget {gib(budget)}",
        f"{'method':<10} {'peak memory':>12}  fits",
    ]
    for e in options:
        lines.append(
            f"{e.method:<10} {gib(e.peak_bytes):>12}  {'yes' if not budget or e.peak_bytes <= budget else 'no'}"
        )
    best = choose(options, budget) if budget else None
    lines.append(
        f"recommended: {best.method}"
        if best
        else "recommended: none fits in memory; use the chunked "
        "pipeline (graphshard chunk, then assign --method stream or kaminpar, then dispatch)"
    )
    return "\n".join(lines)


def table(c: GraphCounts, options: list[Estimate], memory_bytes: int) -> str:
    """The planner's answer as text."""
    lines = [
        f"graph: {c.nodes:,} nodes, {c.edges:,} edges (largest chunk {c.max_chunk_edges:,}), "
        f"{c.disk_bytes / 2**30:.2f} GiB on disk; budget {gib(memory_bytes)}",
        f"{'method':<10} {'peak memory':>12} {'extra disk':>11}  {'fits':<5} peak phase",
    ]
    for e in options:
        lines.append(
            f"{e.method:<10} {gib(e.peak_bytes):>12} {e.disk_bytes / 2**30:>7.2f} GiB  "
            f"{'yes' if e.peak_bytes <= memory_bytes else 'no':<5} {e.phase}"
        )
    best = choose(options, memory_bytes)
    lines.append(f"recommended: {best.method}" if best else "recommended: none fits; raise --memory")
    return "\n".join(lines)

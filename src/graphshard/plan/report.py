"""The planner's answers as text (``graphshard plan``) and the check ``train`` runs before starting its
processes."""

from __future__ import annotations

import math
from pathlib import Path

from ..chunked.spec import read_metadata
from ..errors import InputError
from ..format.config import PartitionConfig, read_config
from .assign import choose, estimates
from .budget import gib, table
from .counts import GraphCounts
from .dispatch import counted_estimates
from .estimate import Estimate
from .partition import dataset_counts, partition_estimates
from .train import train_estimates


def process_table(title: str, per_process: list[Estimate], budget: int) -> str:
    """One line per process (peak private memory, memory-mapped files, phase) and the total against ``budget``."""
    lines = [title, f"{'process':<10} {'peak memory':>12} {'mapped files':>13}  peak phase"]
    for e in per_process:
        lines.append(f"{e.method:<10} {gib(e.peak_bytes):>12} {gib(e.mapped_bytes):>13}  {e.phase}")
    total = sum(e.peak_bytes for e in per_process)
    verdict = "fits" if not budget or total <= budget else "does NOT fit"
    lines.append(f"together {gib(total)} on one machine: {verdict} the budget of {gib(budget)}")
    return "\n".join(lines)


def feature_width(cfg: PartitionConfig, names: tuple[str, ...] = ("feat", "x")) -> int:
    """Input columns of the widest node type's features (0 when no type has any)."""
    widths = [math.prod(shape) for key, (_, shape) in cfg.feature_schema.get("node_feats", {}).items()
              if key.rsplit("/", 1)[1] in names]
    return max(widths, default=0)


def plan_report(dataset: str | None, part_config: str | None, assignment: str | None, num_parts: int, procs: int,
                budget: int, memory_mb: int = 1024, hidden: int = 64, sampled_eval: bool = False) -> str:
    """``graphshard plan``: assignment methods and dispatch ranks for a chunked ``dataset``, or training
    processes for the partitions at ``part_config``."""
    if dataset and not (Path(dataset) / "metadata.json").is_file():  # a dataset partitioned in memory
        return method_table(dataset, partition_estimates(dataset, num_parts), budget)
    if dataset:
        counts = GraphCounts.of(read_metadata(dataset))
        ranks, counted = counted_estimates(dataset, assignment, num_parts, procs)
        how = f"partitions counted from {assignment}" if counted else f"{num_parts} partitions assumed even"
        return table(counts, estimates(counts, num_parts, memory_mb), budget) + "\n\n" + \
            process_table(f"dispatch on {procs} ranks ({how}):", ranks, budget)
    cfg = read_config(part_config)
    width = feature_width(cfg) or hidden  # featureless types learn inputs of --embed-dim (--hidden by default)
    per = train_estimates(cfg, procs, width, hidden, not sampled_eval)
    return process_table(f"train on {procs} processes x {cfg.num_parts} partitions ({width} input columns, hidden "
                         f"{hidden}, {'sampled' if sampled_eval else 'layer-wise'} evaluation):", per, budget)


def check_train_fits(cfg: PartitionConfig, world: int, local: int, hidden: int, layerwise: bool, budget: int) -> None:
    """Raise :class:`InputError` when the ``local`` processes started on this machine (of ``world``) are
    predicted to need more than ``budget`` bytes together."""
    per = train_estimates(cfg, world, feature_width(cfg) or hidden, hidden, layerwise)[:local]
    need = sum(e.peak_bytes for e in per)
    if budget and need > budget:
        worst = max(per, key=lambda e: e.peak_bytes)
        hint = " or --eval-fanouts (sampled evaluation)" if layerwise else ""
        raise InputError(f"training is predicted to need {gib(need)} on this machine ({local} processes; "
                         f"{worst.method} {gib(worst.peak_bytes)} at its {worst.phase}), more than the "
                         f"{gib(budget)} allowed (--memory); start fewer processes{hint}, or spread them over "
                         f"machines (graphshard plan --part-config {cfg.path} for the table)")


def method_table(dataset: str, options: list[Estimate], budget: int) -> str:
    """``graphshard partition`` (in memory) per method: predicted peak, fit, recommendation."""
    nodes, edges, data = dataset_counts(dataset)
    lines = [f"graphshard partition (in memory): {nodes:,} nodes, {edges:,} edges, {data / 2**30:.2f} GiB of arrays; "
             f"budget {gib(budget)}", f"{'method':<10} {'peak memory':>12}  fits"]
    for e in options:
        lines.append(f"{e.method:<10} {gib(e.peak_bytes):>12}  {'yes' if not budget or e.peak_bytes <= budget else 'no'}")
    best = choose(options, budget) if budget else None
    lines.append(f"recommended: {best.method}" if best else "recommended: none fits in memory; use the chunked "
                 "pipeline (graphshard chunk, then assign --method stream or kaminpar, then dispatch)")
    return "\n".join(lines)


def check_partition_fits(dataset: str, method: str, num_parts: int, budget: int) -> None:
    """Raise :class:`InputError` when ``graphshard partition --method`` is predicted to need more than ``budget``."""
    try:
        options = {e.method: e for e in partition_estimates(dataset, num_parts)}
    except InputError:
        return  # no counts to plan with: reading the dataset reports what is wrong with it
    mine = options.get(method)
    if mine is None or not budget or mine.peak_bytes <= budget:
        return
    fits = [f"{m} ({gib(e.peak_bytes)})" for m, e in options.items() if e.peak_bytes <= budget]
    raise InputError(f"partition --method {method} is predicted to need {gib(mine.peak_bytes)}, more than the "
                     f"{gib(budget)} allowed (--memory); methods that fit: {', '.join(fits) or 'none'}; graphs that "
                     "do not fit in memory take the chunked pipeline (graphshard chunk, assign, dispatch)")

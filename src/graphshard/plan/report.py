"""The planner's answers (``graphshard plan``) as data (:func:`plan_data`, what ``--json`` prints) and as text
(:func:`plan_report`, rendered from the same data), from the cost model each step owns: peak memory, and peak disk
with where it lands and the free space there."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .. import disk as space
from ..chunked.counts import GraphCounts
from ..chunked.spec import read_metadata
from ..disk import MARGIN_BYTES, MARGIN_FRACTION, DiskNeed, mount_point, size
from ..format.config import read_config
from ..memory import Estimate, gib
from ..partition.cost import dataset_counts, dataset_data_bytes, partition_disk, partition_estimates
from ..pipeline.assign_cost import assign_disk, choose, estimates
from ..pipeline.dispatch.cost import count_partitions
from ..tasks.options import TrainOptions
from ..train.cost import feature_width, train_estimates
from ..train.device_cost import DeviceNeed, device_need

DEVICE_PARTS = [f for f in DeviceNeed.__dataclass_fields__]


def disk_entry(need: DiskNeed) -> dict[str, Any]:
    """A step's predicted peak of disk, what it is made of, where it lands, the free space there and the verdict."""
    free = space.free_space(need.path)  # looked up at call time: tests report little space by patching it
    return {
        "step": need.step,
        "peak_disk_bytes": need.peak_bytes,
        "disk_parts": dict(need.parts),
        "path": str(need.path),
        "file_system": str(mount_point(need.path)),
        "free_bytes": free,
        "fits": space.fits(need, free),
    }


def _process(e: Estimate) -> dict[str, Any]:
    return {"process": e.method, "peak_memory_bytes": e.peak_bytes, "mapped_bytes": e.mapped_bytes, "phase": e.phase}


def process_data(title: str, per_process: list[Estimate], budget: int, disk: DiskNeed | None = None) -> dict[str, Any]:
    """One entry per process (peak private memory, memory-mapped files, phase), the total against ``budget``, and
    the step's disk on this machine (``disk``, when the step writes)."""
    total = sum(e.peak_bytes for e in per_process)
    return {
        "title": title,
        "budget_bytes": budget,
        "processes": [_process(e) for e in per_process],
        "total_memory_bytes": total,
        "fits": not budget or total <= budget,
        "disk": disk_entry(disk) if disk is not None else None,
    }


def plan_data(
    dataset: str | None,
    part_config: str | None,
    assignment: str | None,
    num_parts: int,
    *,
    procs: int,
    budget: int,
    memory_mb: int = 1024,
    hidden: int = 64,
    sampled_eval: bool = False,
    out: str | os.PathLike = ".",
    num_hops: int = 1,
) -> dict[str, Any]:
    """``graphshard plan`` as data: assignment methods and dispatch ranks for a chunked ``dataset`` (the in-memory
    methods for a dataset directory), or training processes for the partitions at ``part_config``. Disk is
    predicted for outputs written into ``out`` (the steps' ``--out``)."""
    out = Path(out).expanduser().absolute()
    if dataset and not (Path(dataset) / "metadata.json").is_file():  # a dataset partitioned in memory
        return {
            "partition": method_data(
                dataset, partition_estimates(dataset, num_parts), budget, out, num_parts=num_parts, num_hops=num_hops
            )
        }
    if dataset:
        counts = GraphCounts.of(read_metadata(dataset))
        parts = count_partitions(dataset, assignment, num_parts)
        how = f"partitions counted from {assignment}" if parts.counted else f"{num_parts} partitions assumed even"
        dispatch = process_data(
            f"dispatch on {procs} ranks ({how}):",
            parts.estimates(procs, num_hops),
            budget,
            parts.disk(out, num_hops),
        )
        return {"assign": assign_data(counts, num_parts, memory_mb, budget, out=out), "dispatch": dispatch}
    assert part_config is not None  # given when dataset is not (graphshard plan takes exactly one of them)
    cfg = read_config(part_config)
    width = feature_width(cfg) or hidden  # featureless types learn inputs of --embed-dim (--hidden by default)
    per = train_estimates(
        cfg, procs, width, hidden, layerwise=not sampled_eval, host_ranks=procs
    )  # on this host: co-located
    title = (
        f"train on {procs} processes x {cfg.num_parts} partitions ({width} input columns, hidden "
        f"{hidden}, {'sampled' if sampled_eval else 'layer-wise'} evaluation):"
    )
    data = process_data(title, per, budget)
    need = device_need(cfg, TrainOptions(hidden=hidden), procs, width)
    data["device"] = {"peak_bytes": need.peak, "parts": {k: getattr(need, k) for k in DEVICE_PARTS}}
    return {"train": data}


def plan_report(*args: Any, **kwargs: Any) -> str:
    """``graphshard plan`` as text (the arguments of :func:`plan_data`)."""
    return render(plan_data(*args, **kwargs))


def render(data: dict[str, Any]) -> str:
    """The text of :func:`plan_data`'s answer."""
    blocks = []
    if "partition" in data:
        blocks.append(method_text(data["partition"]))
    if "assign" in data:
        blocks.append(assign_text(data["assign"]))
    for step in ("dispatch", "train"):
        if step in data:
            blocks.append(process_text(data[step]))
    return "\n\n".join(blocks)


def disk_line(d: dict[str, Any]) -> str:
    """``disk: dispatch needs 1.20 GiB (partitions' ...) in /out (file system /), 57.00 GiB free: fits``."""
    verdict = "fits" if d["fits"] else "does NOT fit"
    parts = " + ".join(f"{k} {size(v)}" for k, v in d["disk_parts"].items() if v) or "nothing"
    return (
        f"disk: {d['step']} needs {size(d['peak_disk_bytes'])} ({parts}) in {d['path']} (file system "
        f"{d['file_system']}), {size(d['free_bytes'])} free: {verdict} with the margin of "
        f"{MARGIN_FRACTION:.0%} + {size(MARGIN_BYTES)}"
    )


def process_text(d: dict[str, Any]) -> str:
    """One line per process (peak private memory, memory-mapped files, phase), the total against the budget, and
    the step's disk."""
    lines = [d["title"], f"{'process':<10} {'peak memory':>12} {'mapped files':>13}  peak phase"]
    for e in d["processes"]:
        lines.append(f"{e['process']:<10} {gib(e['peak_memory_bytes']):>12} {gib(e['mapped_bytes']):>13}  {e['phase']}")
    verdict = "fits" if d["fits"] else "does NOT fit"
    lines.append(
        f"together {gib(d['total_memory_bytes'])} on one machine: {verdict} the budget of {gib(d['budget_bytes'])}"
    )
    if d["disk"] is not None:
        lines.append(disk_line(d["disk"]))
    if d.get("device"):
        parts = " + ".join(f"{k} {gib(v)}" for k, v in d["device"]["parts"].items())
        lines.append(
            f"with --device cuda, each rank holds at most {gib(d['device']['peak_bytes'])} on its GPU ({parts}; "
            "batches and the layer-wise chunk are not held together)"
        )
    return "\n".join(lines)


def method_data(
    dataset: str, options: list[Estimate], budget: int, out: Path, *, num_parts: int, num_hops: int = 1
) -> dict[str, Any]:
    """``graphshard partition`` (in memory) per method: predicted peak, fit, the disk of the partitions (the
    same for every method), recommendation."""
    nodes, edges, data = dataset_counts(dataset)
    node_data, edge_data = dataset_data_bytes(dataset)
    disk = disk_entry(
        partition_disk(
            out, nodes, edges, num_parts, node_data_bytes=node_data, edge_data_bytes=edge_data, num_hops=num_hops
        )
    )
    methods = [
        {
            "method": e.method,
            "peak_memory_bytes": e.peak_bytes,
            "fits": not budget or e.peak_bytes <= budget,
            "peak_disk_bytes": disk["peak_disk_bytes"],
            "disk_fits": disk["fits"],
        }
        for e in options
    ]
    best = choose(options, budget) if budget and disk["fits"] else None
    return {
        "nodes": nodes,
        "edges": edges,
        "data_bytes": data,
        "budget_bytes": budget,
        "methods": methods,
        "disk": disk,
        "recommended": best.method if best else None,
    }


def method_text(d: dict[str, Any]) -> str:
    lines = [
        f"graphshard partition (in memory): {d['nodes']:,} nodes, {d['edges']:,} edges, "
        f"{d['data_bytes'] / 2**30:.2f} GiB of arrays; budget {gib(d['budget_bytes'])}",
        f"{'method':<10} {'peak memory':>12}  fits  {'peak disk':>10}  disk",
    ]
    for m in d["methods"]:
        lines.append(
            f"{m['method']:<10} {gib(m['peak_memory_bytes']):>12}  {'yes' if m['fits'] else 'no':<4}  "
            f"{gib(m['peak_disk_bytes']):>10}  {'yes' if m['disk_fits'] else 'no'}"
        )
    lines.append(disk_line(d["disk"]))
    if d["recommended"]:
        lines.append(f"recommended: {d['recommended']}")
    elif not d["disk"]["fits"]:
        lines.append("recommended: none; the partitions do not fit the free disk (free space, or another --out)")
    else:
        lines.append(
            "recommended: none fits in memory; use the chunked "
            "pipeline (graphshard chunk, then assign --method stream or kaminpar, then dispatch)"
        )
    return "\n".join(lines)


def assign_data(c: GraphCounts, num_parts: int, memory_mb: int, budget: int, *, out: Path) -> dict[str, Any]:
    """Every assignment method on ``c``: peak memory and phase, peak disk where it lands, fit, recommendation."""
    options = estimates(c, num_parts, memory_mb)
    disks = {e.method: disk_entry(assign_disk(c, e.method, num_parts, out, memory_mb=memory_mb)) for e in options}
    methods = [
        {
            "method": e.method,
            "peak_memory_bytes": e.peak_bytes,
            "fits": e.peak_bytes <= budget,
            "phase": e.phase,
            "disk": disks[e.method],
        }
        for e in options
    ]
    best = choose([e for e in options if disks[e.method]["fits"]], budget)
    return {
        "nodes": c.nodes,
        "edges": c.edges,
        "max_chunk_edges": c.max_chunk_edges,
        "disk_bytes": c.disk_bytes,
        "budget_bytes": budget,
        "methods": methods,
        "recommended": best.method if best else None,
    }


def assign_text(d: dict[str, Any]) -> str:
    """The assignment methods' table."""
    lines = [
        f"graph: {d['nodes']:,} nodes, {d['edges']:,} edges (largest chunk {d['max_chunk_edges']:,}), "
        f"{d['disk_bytes'] / 2**30:.2f} GiB on disk; budget {gib(d['budget_bytes'])}",
        f"{'method':<10} {'peak memory':>12} {'peak disk':>11}  {'fits':<5} {'disk':<5} peak phase",
    ]
    for m in d["methods"]:
        disk = m["disk"]
        lines.append(
            f"{m['method']:<10} {gib(m['peak_memory_bytes']):>12} {disk['peak_disk_bytes'] / 2**30:>7.2f} GiB  "
            f"{'yes' if m['fits'] else 'no':<5} {'yes' if disk['fits'] else 'no':<5} {m['phase']}"
        )
    places = {(m["disk"]["path"], m["disk"]["file_system"], m["disk"]["free_bytes"]) for m in d["methods"]}
    for path, fs, free in sorted(places):
        users = [m["method"] for m in d["methods"] if m["disk"]["path"] == path]
        lines.append(f"disk of {', '.join(users)}: in {path} (file system {fs}), {size(free)} free")
    lines.append(
        f"recommended: {d['recommended']}"
        if d["recommended"]
        else "recommended: none fits; raise --memory (or free disk)"
    )
    return "\n".join(lines)

"""Budgets: the machine's memory, sizes as users write them, the check that refuses an assignment method
predicted not to fit, and the planner's tables."""

from __future__ import annotations

import os
from pathlib import Path

from ..chunked.spec import read_metadata
from ..errors import InputError
from .assign import choose, estimates
from .counts import GraphCounts
from .estimate import Estimate


def machine_memory() -> int:
    """This machine's memory (bytes), from /proc/meminfo; 0 when unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def allowed(memory: int | str | None = None) -> int:
    """The memory a step may use: ``memory`` (bytes, or a size such as ``16G``; see :func:`parse_size`), or,
    when it is not given (None, 0, empty), this machine's memory (0 when unknown: nothing is refused)."""
    if isinstance(memory, str) and memory:
        return parse_size(memory)
    return int(memory) if memory else machine_memory()


def parse_size(text: str) -> int:
    """``24G``, ``512M``, ``1.5T`` or plain bytes -> bytes; raises :class:`InputError`."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1] if t and t[-1] in units else ""
    try:
        value = float(t[: len(t) - len(unit)])
    except ValueError:
        raise InputError(f"memory size {text!r}: expected a number with an optional unit K, M, G or T") from None
    if not value > 0:
        raise InputError(f"memory size {text!r} must be positive")
    return int(value * units[unit])


def check_fits(in_dir: str | os.PathLike, method: str, num_parts: int, memory_bytes: int, memory_mb: int) -> Estimate:
    """Refuse (:class:`InputError`, with the numbers and the methods that fit) an assignment whose predicted
    peak exceeds ``memory_bytes``; returns the estimate."""
    options = estimates(GraphCounts.of(read_metadata(in_dir)), num_parts, memory_mb)
    mine = next(e for e in options if e.method == method)
    if mine.peak_bytes > memory_bytes:
        fits = [f"{e.method} ({gib(e.peak_bytes)})" for e in options if e.peak_bytes <= memory_bytes]
        raise InputError(f"assign --method {method} is predicted to need {gib(mine.peak_bytes)} at its peak "
                         f"({mine.phase}), more than the {gib(memory_bytes)} allowed; methods that fit: "
                         f"{', '.join(fits) or 'none'} (graphshard plan --dataset {in_dir} for the table)")
    return mine


def gib(b: int) -> str:
    """``b`` bytes as the planner's messages and tables show them (``1.25 GiB``)."""
    return f"{b / 2**30:.2f} GiB"


def table(c: GraphCounts, options: list[Estimate], memory_bytes: int) -> str:
    """The planner's answer as text."""
    lines = [f"graph: {c.nodes:,} nodes, {c.edges:,} edges (largest chunk {c.max_chunk_edges:,}), "
             f"{c.disk_bytes / 2**30:.2f} GiB on disk; budget {gib(memory_bytes)}",
             f"{'method':<10} {'peak memory':>12} {'extra disk':>11}  {'fits':<5} peak phase"]
    for e in options:
        lines.append(f"{e.method:<10} {gib(e.peak_bytes):>12} {e.disk_bytes / 2**30:>7.2f} GiB  "
                     f"{'yes' if e.peak_bytes <= memory_bytes else 'no':<5} {e.phase}")
    best = choose(options, memory_bytes)
    lines.append(f"recommended: {best.method}" if best else "recommended: none fits; raise --memory")
    return "\n".join(lines)

"""Memory planner: the peak resident memory and disk use each assignment method needs for a chunked graph,
which methods fit a memory budget, and which to use (``graphshard plan``; ``assign --memory`` refuses a
method that cannot fit before it starts).

Predictions are sums of what each phase holds at once, from the graph's counts (nodes, edges, the
largest edge chunk, adjacency entries estimated from the first chunk) and the out-of-core sort buffer,
plus an assumed fixed part for the process (interpreter, NumPy, numba and its LLVM library: 98-165 MiB
measured, by how much of that library the system keeps resident). The METIS and KaMinPar coefficients
were measured on R-MAT scale 21 and 24 and cnr-2000 (``benchmarks/scale.py``); what grows with the graph
is meant as an upper bound within 25 % of the measured growth.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .chunked.spec import ChunkedMeta, read_metadata
from .errors import InputError

BASE = 100 << 20  # a graphshard process before it reads the graph (measured: 98 MB)
COMPILED = 50 << 20  # more once numba's kernels (LLVM, threads) or METIS/KaMinPar are loaded (measured 49-57)
METIS_BYTES_PER_EDGE = 165  # METIS 5 (pymetis) with graphshard's CSR, per stored directed edge (measured 126-158)
KAMINPAR_BYTES_PER_ENTRY = 12.7  # KaMinPar (compressed graph, partition state), per adjacency entry (measured 10.5-13.5)
KAMINPAR_FIXED = 32 << 20  # and its buffers that do not grow with the graph
PREFERENCE = ("kaminpar", "metis", "stream", "random")  # by cut quality at equal fit, then memory


@dataclass(frozen=True)
class GraphCounts:
    """What the planner needs of a chunked graph."""

    nodes: int
    edges: int
    max_chunk_edges: int
    disk_bytes: int
    entries: int  # adjacency entries (2 × undirected edges) expected: 2 × edges less reverse pairs seen

    @classmethod
    def of(cls, meta: ChunkedMeta) -> "GraphCounts":
        counts = [c for et in meta.etypes for c in _chunk_edges(meta, et)]
        files = [p for s in meta.edges.values() for p in s.paths]
        files += [p for d in meta.node_data.values() for s in d.values() for p in s.paths]
        edges = sum(meta.num_edges.values())
        paired = _paired_fraction(meta)
        return cls(sum(meta.num_nodes.values()), edges, max(counts, default=0),
                   sum(os.path.getsize(p) for p in files if os.path.exists(p)), int(2 * edges * (1 - paired / 2)))


SAMPLE = 1 << 20


def _paired_fraction(meta: ChunkedMeta) -> float:
    """Share of the first edge chunk's first rows (up to :data:`SAMPLE`, same node types at both ends) whose
    reverse edge is among them: graphs stored with both directions have about half as many adjacency
    entries as their edge count suggests. Reverse edges elsewhere are not seen, so this errs low (a larger
    prediction)."""
    et = next((e for e in meta.etypes if e[0] == e[2] and meta.edges[e].paths), None)
    if et is None or meta.edges[et].format != "numpy":
        return 0.0
    from .chunked.readers import read_edges

    try:
        src, dst = read_edges(meta.edges[et], 0)
    except (OSError, ValueError):
        return 0.0
    src, dst = np.asarray(src[:SAMPLE]), np.asarray(dst[:SAMPLE])
    keep = src != dst
    n = max(1, meta.num_nodes[et[0]])
    forward, backward = src[keep] * n + dst[keep], dst[keep] * n + src[keep]
    return float(np.isin(forward, backward).mean()) if forward.size else 0.0


def _chunk_edges(meta: ChunkedMeta, et: tuple[str, str, str]) -> list[int]:
    """Edges per chunk of ``et``: declared, read from NumPy headers, or shared by file size."""
    declared = (meta.edge_chunk_counts or {}).get(et)
    if declared:
        return list(declared)
    spec = meta.edges[et]
    if spec.format == "numpy":
        try:
            return [int(np.load(p, mmap_mode="r", allow_pickle=False).shape[0]) for p in spec.paths]
        except (OSError, ValueError):
            pass
    sizes = [os.path.getsize(p) if os.path.exists(p) else 0 for p in spec.paths]
    total = max(1, sum(sizes))
    return [-(-meta.num_edges[et] * s // total) for s in sizes]


@dataclass(frozen=True)
class Estimate:
    """One method's predicted peak resident memory (bytes, one process) and extra disk (bytes)."""

    method: str
    peak_bytes: int
    disk_bytes: int
    phase: str  # the phase at the peak


def _read_chunk(e: int) -> int:
    """Reading one edge chunk as homogeneous (src, dst): the memory-mapped (E, 2) int64 rows that stay
    resident and the range check's temporaries (IDs of other node types are shifted into copies, which
    this leaves out: the homogeneous case is the common large one)."""
    return 24 * e


def _out_of_core(c: GraphCounts, memory_bytes: int) -> dict[str, int]:
    """Peak of each phase of the out-of-core adjacency (:mod:`graphshard.pipeline.disk_csr`)."""
    entries = 2 * c.edges  # keys before de-duplication: both directions of every stored edge
    buckets = max(1, -(-12 * entries // memory_bytes))
    return {"degrees": 8 * c.nodes + _read_chunk(c.max_chunk_edges),
            "distribute": _read_chunk(c.max_chunk_edges) + 16 * c.max_chunk_edges,
            # the bucket's keys and rows fill the buffer; allocator slack measured up to 8 % on top
            "sort": min(memory_bytes, 12 * entries) * 11 // 10 + 64 * (c.nodes // buckets + 1)}


def estimates(c: GraphCounts, num_parts: int, memory_mb: int = 1024) -> list[Estimate]:
    """Predicted peaks of ``random``, ``stream``, ``kaminpar`` and ``metis`` on ``c`` into ``num_parts``."""
    buf = memory_mb << 20
    build = _out_of_core(c, buf)
    adjacency_disk = 8 * 2 * c.edges + 4 * c.entries + 8 * c.nodes  # bucket files (2E keys), the CSR
    stream = build | {"partition": 24 * c.nodes + min(buf // 2, 4 * c.entries)}
    kaminpar = build | {"kaminpar": KAMINPAR_FIXED + 24 * c.nodes + int(KAMINPAR_BYTES_PER_ENTRY * c.entries)}
    out = [Estimate("random", BASE + 24 * c.nodes, 0, "assign"),
           _peak("stream", stream, adjacency_disk),
           _peak("kaminpar", kaminpar, adjacency_disk + 8 * c.entries + 8 * c.nodes),
           Estimate("metis", BASE + COMPILED + METIS_BYTES_PER_EDGE * c.edges + 16 * c.nodes, 0, "METIS")]
    return out


def _peak(method: str, phases: dict[str, int], disk: int) -> Estimate:
    phase = max(phases, key=phases.get)
    return Estimate(method, BASE + COMPILED + phases[phase], disk, phase)


def choose(options: list[Estimate], memory_bytes: int) -> Estimate | None:
    """The preferred method (see :data:`PREFERENCE`) whose predicted peak fits ``memory_bytes``."""
    fitting = {e.method: e for e in options if e.peak_bytes <= memory_bytes}
    return next((fitting[m] for m in PREFERENCE if m in fitting), None)


def machine_memory() -> int:
    """This machine's memory (bytes), from /proc/meminfo; 0 when unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


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
        fits = [f"{e.method} ({_gb(e.peak_bytes)})" for e in options if e.peak_bytes <= memory_bytes]
        raise InputError(f"assign --method {method} is predicted to need {_gb(mine.peak_bytes)} at its peak "
                         f"({mine.phase}), more than the {_gb(memory_bytes)} allowed; methods that fit: "
                         f"{', '.join(fits) or 'none'} (graphshard plan --dataset {in_dir} for the table)")
    return mine


def _gb(b: int) -> str:
    return f"{b / 2**30:.2f} GiB"


def table(c: GraphCounts, options: list[Estimate], memory_bytes: int) -> str:
    """The planner's answer as text."""
    lines = [f"graph: {c.nodes:,} nodes, {c.edges:,} edges (largest chunk {c.max_chunk_edges:,}), "
             f"{c.disk_bytes / 2**30:.2f} GiB on disk; budget {_gb(memory_bytes)}",
             f"{'method':<10} {'peak memory':>12} {'extra disk':>11}  {'fits':<5} peak phase"]
    for e in options:
        lines.append(f"{e.method:<10} {_gb(e.peak_bytes):>12} {e.disk_bytes / 2**30:>7.2f} GiB  "
                     f"{'yes' if e.peak_bytes <= memory_bytes else 'no':<5} {e.phase}")
    best = choose(options, memory_bytes)
    lines.append(f"recommended: {best.method}" if best else "recommended: none fits; raise --memory")
    return "\n".join(lines)


__all__ = ["Estimate", "GraphCounts", "check_fits", "choose", "estimates", "parse_size", "table"]

"""The cost model of assignment (step 1): the peak resident memory and disk use each assignment method needs for a
chunked graph, which methods fit a memory budget, and which to use (``graphshard plan``; ``assign --memory`` refuses a
method that cannot fit before it starts, and every method is refused when its peak of disk does not fit the free
space beside ``--out``: :func:`assign_disk`).

Predictions are sums of what each phase holds at once, from the graph's counts (nodes, edges, the
largest edge chunk, adjacency entries estimated from the first chunk) and the out-of-core sort buffer,
plus an assumed fixed part for the process (interpreter, NumPy, numba and its LLVM library: 98-165 MiB
measured, by how much of that library the system keeps resident). The METIS and KaMinPar coefficients
were measured on R-MAT scale 21 and 24 and cnr-2000 (``benchmarks/scale.py``); what grows with the graph
is meant as an upper bound within 25 % of the measured growth.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from ..chunked.counts import GraphCounts
from ..chunked.spec import ChunkedMeta, read_metadata
from ..disk import FILE_BYTES, DiskNeed
from ..errors import InputError
from ..memory import Estimate, gib
from ..partition.assign.coarse import SLICE
from .disk_csr import BLOCK_NODES, BYTES_PER_KEY, bucket_keys, dedup_chunks

OUT_OF_CORE = ("stream", "kaminpar")  # methods that build the adjacency on disk, beside the output

BASE = 100 << 20  # a graphshard process before it reads the graph (measured: 98 MB)
COMPILED = 50 << 20  # more once numba's kernels (LLVM, threads) or METIS/KaMinPar are loaded (measured 49-57)
METIS_BYTES_PER_EDGE = 165  # METIS 5 (pymetis) with graphshard's CSR, per stored directed edge (measured 126-158)
# On graphs whose order carries locality (web crawls, meshes) METIS's coarsening shrinks the graph level by
# level, so its hierarchy holds far less than on power-law graphs without it (measured 103 on cnr-2000)
METIS_BYTES_PER_EDGE_ORDERED = 120
KAMINPAR_BYTES_PER_ENTRY = 11.2  # KaMinPar (compressed graph, partition state), per adjacency entry (R-MAT 21, 24)
KAMINPAR_FIXED = 32 << 20  # and its buffers that do not grow with the graph
# buffers that grow with the graph up to a cap (measured: 14.6 bytes per entry on R-MAT 17, 13.3 on cnr-2000)
KAMINPAR_GROWING, KAMINPAR_GROWING_CAP = 3.5, 16 << 20
PREFERENCE = ("kaminpar", "metis", "stream", "random")  # by cut quality at equal fit, then memory


def _read_chunk(e: int) -> int:
    """Reading one edge chunk as homogeneous (src, dst): the memory-mapped (E, 2) int64 rows that stay
    resident and the range check's temporaries (IDs of other node types are shifted into copies, which
    this leaves out: the homogeneous case is the common large one)."""
    return 24 * e


def _out_of_core(c: GraphCounts, memory_bytes: int) -> dict[str, int]:
    """Peak of each phase of the out-of-core adjacency (:mod:`graphshard.pipeline.disk_csr`)."""
    entries = 2 * c.edges  # keys before de-duplication: both directions of every stored edge
    bucket = min(bucket_keys(memory_bytes), entries)
    buckets = max(1, -(-entries // bucket))
    return {
        "degrees": 8 * c.nodes + _read_chunk(c.max_chunk_edges),
        "distribute": 2 * c.nodes + _read_chunk(c.max_chunk_edges) + 16 * c.max_chunk_edges,
        # a bucket's keys and rows (allocator slack measured up to 8 % on top), the marks of the
        # de-duplication, and the per-thread row counts
        "sort": BYTES_PER_KEY * bucket * 11 // 10 + 4 * dedup_chunks() * c.nodes + 64 * (c.nodes // buckets + 1),
    }


def estimates(c: GraphCounts, num_parts: int, memory_mb: int = 1024) -> list[Estimate]:
    """Predicted peaks of ``random``, ``stream``, ``kaminpar`` and ``metis`` on ``c`` into ``num_parts``."""
    buf = memory_mb << 20
    build = _out_of_core(c, buf)
    disk = {m: sum(assign_disk_parts(c, m, num_parts, memory_mb).values()) for m in PREFERENCE}
    # the passes' state and a block of the adjacency; on ordered graphs also the contraction of the clusters
    # (a slice of entries at a time) and the contracted graph (at most 2 entries per node, 24 bytes each)
    contraction = 32 * min(SLICE, c.entries) + 48 * c.nodes if c.ordered else 0
    # blocks of at most buf / 8 entries and BLOCK_NODES nodes (two alive while the next is read, if several)
    block = 4 * min(buf // 8, c.entries, c.entries * BLOCK_NODES // max(1, c.nodes))
    alive = 1 if block == 4 * c.entries else 2
    stream = build | {"partition": 24 * c.nodes + alive * block + contraction}
    growing = min(int(KAMINPAR_GROWING * c.entries), KAMINPAR_GROWING_CAP)
    kaminpar = build | {"kaminpar": KAMINPAR_FIXED + 24 * c.nodes + int(KAMINPAR_BYTES_PER_ENTRY * c.entries) + growing}
    out = [
        Estimate("random", BASE + 24 * c.nodes, disk["random"], "assign"),
        _peak("stream", stream, disk["stream"]),
        _peak("kaminpar", kaminpar, disk["kaminpar"]),
        Estimate("metis", BASE + COMPILED + _metis_per_edge(c) * c.edges + 16 * c.nodes, disk["metis"], "METIS"),
    ]
    return out


def _metis_per_edge(c: GraphCounts) -> int:
    return METIS_BYTES_PER_EDGE_ORDERED if c.ordered else METIS_BYTES_PER_EDGE


def _peak(method: str, phases: dict[str, int], disk: int) -> Estimate:
    phase = max(phases, key=phases.__getitem__)
    return Estimate(method, BASE + COMPILED + phases[phase], disk, phase)


def choose(options: list[Estimate], memory_bytes: int) -> Estimate | None:
    """The preferred method (see :data:`PREFERENCE`) whose predicted peak fits ``memory_bytes``."""
    fitting = {e.method: e for e in options if e.peak_bytes <= memory_bytes}
    return next((fitting[m] for m in PREFERENCE if m in fitting), None)


def surely_fits(meta: ChunkedMeta, method: str, num_parts: int, memory_bytes: int, *, memory_mb: int) -> bool:
    """Whether ``method`` fits ``memory_bytes`` even at its largest prediction for any first-chunk shape (every
    edge without its reverse, node order with or without locality): decided from counts alone, without the
    sample of the first chunk that :func:`check_fits` reads (its memory would add to the step's peak)."""
    rough = GraphCounts.of(meta, shape=False)
    bound = max(
        e.peak_bytes
        for ordered in (False, True)
        for e in estimates(replace(rough, ordered=ordered), num_parts, memory_mb)
        if e.method == method
    )
    return bound <= memory_bytes


def check_fits(
    in_dir: str | os.PathLike,
    method: str,
    num_parts: int,
    memory_bytes: int,
    *,
    memory_mb: int,
    meta: ChunkedMeta | None = None,
) -> Estimate:
    """Refuse (:class:`InputError`, with the numbers and the methods that fit) an assignment whose predicted
    peak exceeds ``memory_bytes``; returns the estimate. ``meta``: the graph's metadata, when already read."""
    options = estimates(GraphCounts.of(meta or read_metadata(in_dir)), num_parts, memory_mb)
    mine = next(e for e in options if e.method == method)
    if mine.peak_bytes > memory_bytes:
        fits = [f"{e.method} ({gib(e.peak_bytes)})" for e in options if e.peak_bytes <= memory_bytes]
        raise InputError(
            f"assign --method {method} is predicted to need {gib(mine.peak_bytes)} at its peak "
            f"({mine.phase}), more than the {gib(memory_bytes)} allowed; methods that fit: "
            f"{', '.join(fits) or 'none'} (graphshard plan --dataset {in_dir} for the table)"
        )
    return mine


def assignment_bytes(nodes: int, num_parts: int, fmt: str = "txt", ntypes: int = 1) -> int:
    """The assignment files: a line of the partition's digits per node (``txt``), or int64 per node (``npy``),
    and ``partition_meta.json``."""
    per_node = len(str(max(0, num_parts - 1))) + 1 if fmt == "txt" else 8
    return per_node * nodes + FILE_BYTES * (ntypes + 1)


def assign_disk_parts(
    c: GraphCounts,
    method: str,
    num_parts: int,
    memory_mb: int = 1024,
    *,
    fmt: str = "txt",
    balance_edges: bool = False,
    parhip: bool = True,
) -> dict[str, int]:
    """What is on disk at the peak of ``assign --method``, by kind. ``stream`` and ``kaminpar`` first build the
    adjacency (:mod:`.disk_csr`) in a work directory beside the output: every stored edge in both directions
    as an 8-byte key in the bucket files (16 bytes per edge; the sort pass deletes each bucket as it appends
    its rows to ``xadj.bin``, 8 bytes per node, and ``adjncy.bin``, so the peak is when the last key is
    written); ``kaminpar`` then writes the ParHIP file beside the CSR (8 bytes per node and per entry, node
    weights with ``balance_edges``). The work directory is removed before the assignment files are written,
    so the peak is the largest of these phases, not their sum. ``parhip=False`` leaves KaMinPar's phase out (its
    size depends on the adjacency entries, known exactly once the CSR is built: ``assign`` checks it then, before
    writing the file; the estimate of ``c.entries`` needs a sample of the first chunk, whose memory would add to
    the step's peak)."""
    phases = [{"assignment files": assignment_bytes(c.nodes, num_parts, fmt)}]
    if method in OUT_OF_CORE:
        buckets = max(1, -(-2 * c.edges // bucket_keys(memory_mb << 20)))
        phases.append(
            {"adjacency bucket files": 16 * c.edges + FILE_BYTES * buckets, "adjacency rows": 8 * (c.nodes + 1)}
        )
        if method == "kaminpar" and parhip:
            phases.append(parhip_disk_parts(c.nodes, c.entries, balance_edges))
    return max(phases, key=lambda p: sum(p.values()))


def parhip_disk_parts(nodes: int, entries: int, weights: bool) -> dict[str, int]:
    """KaMinPar's phase: the adjacency's CSR (``xadj`` int64, ``adjncy`` int32 below 2**31 nodes) and the ParHIP
    file written beside it (8 bytes per node and per entry, and per node again with node weights)."""
    width = 4 if nodes < 2**31 else 8
    parhip = 24 + 8 * (nodes + 1) + 8 * entries + (8 * nodes if weights else 0)
    return {"adjacency (CSR)": 8 * (nodes + 1) + width * entries + FILE_BYTES, "ParHIP file": parhip}


def assign_disk(
    c: GraphCounts,
    method: str,
    num_parts: int,
    out: str | os.PathLike,
    *,
    memory_mb: int = 1024,
    fmt: str = "txt",
    balance_edges: bool = False,
    parhip: bool = True,
) -> DiskNeed:
    """The predicted peak of disk of ``assign --method`` writing to ``out`` (see :func:`assign_disk_parts`):
    beside ``out`` (its parent directory) for the out-of-core methods, in ``out`` otherwise."""
    where = Path(out).expanduser().absolute()
    return DiskNeed(
        f"assign --method {method}",
        where.parent if method in OUT_OF_CORE else where,
        assign_disk_parts(c, method, num_parts, memory_mb, fmt=fmt, balance_edges=balance_edges, parhip=parhip),
    )

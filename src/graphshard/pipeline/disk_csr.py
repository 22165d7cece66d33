"""The undirected, de-duplicated, self-loop-free adjacency (CSR) of a chunked graph, built out of core in
bounded memory, for partitioners that need each node's neighbours together (``assign --method stream``
and ``kaminpar`` on chunked input).

Node IDs are homogeneous: node types in the metadata's order, each type's IDs after the previous types'.
Three passes over the edge chunks' data, memory O(nodes) plus a buffer of ``memory_bytes``:

1. **degrees**: each node's number of adjacency entries (both directions, duplicates included) — an upper
   bound that sizes the buckets;
2. **distribute**: every entry ``(u, v)``, as the key ``u * n + v``, is appended to the bucket file of
   ``u``'s node range (ranges cut so a bucket's keys fit the buffer);
3. **sort**: bucket by bucket, keys are sorted and de-duplicated, and the rows appended to ``xadj.bin``
   (int64, n + 1) and ``adjncy.bin`` (int32; int64 from 2**31 nodes on).

The bucket files take 16 bytes per directed edge of disk while the build runs and are deleted after.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np

from ..chunked.load import edge_offsets, read_checked_edges
from ..chunked.spec import ChunkedMeta
from ..jit import kernel
from ..partition.kernels import chunk_bounds, chunk_positions

log = logging.getLogger(__name__)
BYTES_PER_KEY = 12  # a bucket's keys (sorted in place) and its rows' neighbours (int32; int64 past 2**31 nodes)


@dataclass
class DiskCSR:
    """``adjncy[xadj[v]:xadj[v+1]]`` (files in ``directory``) are the distinct neighbours of ``v``,
    ascending; ``in_degree`` (directed, as the chunks give the edges; kept only when asked for)."""

    directory: Path
    num_nodes: int
    num_entries: int
    id_dtype: np.dtype
    type_offsets: dict[str, int]
    in_degree: np.ndarray | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def xadj_path(self) -> Path:
        return self.directory / "xadj.bin"

    @property
    def adjncy_path(self) -> Path:
        return self.directory / "adjncy.bin"

    def xadj(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """``xadj[lo:hi + 1]`` read from disk."""
        hi = self.num_nodes if hi is None else hi
        return np.fromfile(self.xadj_path, dtype=np.int64, count=hi - lo + 1, offset=lo * 8)

    def blocks(self, max_entries: int = 1 << 24) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """``(lo, xadj_block, adjncy_block)`` over consecutive node ranges, each holding at most
        ``max_entries`` entries (or one node's); ``xadj_block`` starts at 0. Sequential file reads:
        nothing stays mapped."""
        size = self.id_dtype.itemsize
        with open(self.adjncy_path, "rb") as f:
            lo = 0
            step = 1 << 20
            while lo < self.num_nodes:
                xs = self.xadj(lo, min(self.num_nodes, lo + step))
                cut = int(np.searchsorted(xs, xs[0] + max_entries, side="right")) - 1
                cut = max(cut, 1)
                block = xs[:cut + 1] - xs[0]
                f.seek(int(xs[0]) * size)
                adj = np.fromfile(f, dtype=self.id_dtype, count=int(block[-1]))
                yield lo, block, adj
                lo += cut

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def homogeneous_offsets(meta: ChunkedMeta) -> dict[str, int]:
    """Each node type's first homogeneous ID (types in the metadata's order)."""
    out, total = {}, 0
    for t in meta.ntypes:
        out[t] = total
        total += meta.num_nodes[t]
    return out


def _chunks(meta: ChunkedMeta, offsets: dict[str, int]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every edge chunk as homogeneous ``(src, dst)``, IDs checked (NumPy chunks of the first node type
    stay memory-mapped views: no copy)."""
    for et in meta.etypes:
        edge_offsets(meta, et)
        a, b = offsets[et[0]], offsets[et[2]]
        for i in range(len(meta.edges[et].paths)):
            src, dst = read_checked_edges(meta, et, i)
            yield (src + a if a else src), (dst + b if b else dst)
            del src, dst


def build_disk_csr(meta: ChunkedMeta, directory: str | os.PathLike, memory_bytes: int = 1 << 30,
                   in_degree: bool = False) -> DiskCSR:
    """Build the adjacency of the chunked graph ``meta`` into ``directory`` (created; see the module
    docstring). ``memory_bytes`` bounds the sort buffer; ``in_degree``: also count directed in-degrees."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    offsets = homogeneous_offsets(meta)
    n = sum(meta.num_nodes.values())
    times: dict[str, float] = {}
    start = time.perf_counter()
    degree = np.zeros(n, dtype=np.int64)
    indeg = np.zeros(n, dtype=np.int64) if in_degree else None
    for src, dst in _chunks(meta, offsets):
        _count(src, dst, degree)
        if indeg is not None:
            _count_in(dst, indeg)
        del src, dst  # one chunk at a time: nothing of it lives while the next is read
    bounds = _bucket_bounds(degree, max(1, memory_bytes // BYTES_PER_KEY))
    del degree
    times["degrees_s"] = time.perf_counter() - start
    start = time.perf_counter()
    buckets = [out / f"bucket-{b}.bin" for b in range(len(bounds) - 1)]
    files = [open(p, "wb") for p in buckets]
    try:
        for src, dst in _chunks(meta, offsets):
            keys, cuts = _distribute(src, dst, n, bounds, numba.get_num_threads())
            del src, dst
            for b in np.flatnonzero(np.diff(cuts)):
                files[b].write(memoryview(keys[cuts[b]:cuts[b + 1]]))
            del keys
    finally:
        for f in files:
            f.close()
    times["distribute_s"] = time.perf_counter() - start
    start = time.perf_counter()
    id_dtype = np.dtype(np.int32 if n < 2**31 else np.int64)
    entries = 0
    with open(out / "xadj.bin", "wb") as fx, open(out / "adjncy.bin", "wb") as fa:
        fx.write(np.zeros(1, dtype=np.int64).tobytes())
        for b, path in enumerate(buckets):
            keys = np.fromfile(path, dtype=np.int64)
            path.unlink()
            adj = np.empty(keys.shape[0], dtype=id_dtype)
            rows_at, pos = _row_starts(keys, n, int(bounds[b]), int(bounds[b + 1]), numba.get_num_threads())
            counts, kept = _rows(keys, n, int(bounds[b]), adj, rows_at, pos)
            del keys
            fx.write(memoryview(entries + np.cumsum(counts)))
            fa.write(memoryview(adj[:kept]))
            entries += kept
    times["sort_s"] = time.perf_counter() - start
    log.info("out-of-core adjacency of %d nodes, %d entries in %d buckets: %s", n, entries, len(buckets), times)
    return DiskCSR(out, n, entries, id_dtype, offsets, indeg, times)


@kernel(nogil=True)
def _count(src, dst, degree):
    for i in range(src.shape[0]):
        if src[i] != dst[i]:
            degree[src[i]] += 1
            degree[dst[i]] += 1


@kernel(nogil=True)
def _count_in(dst, indeg):
    for i in range(dst.shape[0]):
        indeg[dst[i]] += 1


def _bucket_bounds(degree: np.ndarray, cap: int) -> np.ndarray:
    """Node-range boundaries whose summed degrees stay within ``cap`` (a single node may exceed it)."""
    cum = np.cumsum(degree)
    bounds = [0]
    while bounds[-1] < degree.shape[0]:
        base = cum[bounds[-1] - 1] if bounds[-1] else 0
        nxt = int(np.searchsorted(cum, base + cap, side="right"))
        bounds.append(max(nxt, bounds[-1] + 1))
    return np.asarray(bounds, dtype=np.int64)


@kernel(parallel=True)
def _distribute(src, dst, n, bounds, chunks):
    """Both directions' keys ``u * n + v`` (self-loops dropped), grouped by the bucket of ``u``; returns
    the keys and the bucket boundaries in them. Chunks of edges in parallel, each writing at positions
    counted beforehand."""
    nb = bounds.shape[0] - 1
    b = chunk_bounds(src.shape[0], chunks)
    counts = np.zeros((chunks, nb), dtype=np.int64)
    for c in numba.prange(chunks):
        for i in range(b[c], b[c + 1]):
            if src[i] != dst[i]:
                counts[c, np.searchsorted(bounds, src[i], side="right") - 1] += 1
                counts[c, np.searchsorted(bounds, dst[i], side="right") - 1] += 1
    pos, cuts = chunk_positions(counts)
    keys = np.empty(cuts[-1], dtype=np.int64)
    for c in numba.prange(chunks):
        for i in range(b[c], b[c + 1]):
            u, v = src[i], dst[i]
            if u != v:
                bu = np.searchsorted(bounds, u, side="right") - 1
                keys[pos[c, bu]] = u * n + v
                pos[c, bu] += 1
                bv = np.searchsorted(bounds, v, side="right") - 1
                keys[pos[c, bv]] = v * n + u
                pos[c, bv] += 1
    return keys, cuts


def _row_starts(keys: np.ndarray, n: int, lo: int, hi: int, threads: int) -> tuple[np.ndarray, np.ndarray]:
    """Row offsets of the keys of nodes ``[lo, hi)`` (m + 1) and each thread's write positions (threads, m)."""
    counts = _chunk_rows(keys, n, lo, hi, threads)
    pos, start = chunk_positions(counts)
    return start, pos


@kernel(parallel=True)
def _chunk_rows(keys, n, lo, hi, chunks):
    b = chunk_bounds(keys.shape[0], chunks)
    counts = np.zeros((chunks, hi - lo), dtype=np.int64)
    for c in numba.prange(chunks):
        for i in range(b[c], b[c + 1]):
            counts[c, keys[i] // n - lo] += 1
    return counts


@kernel(parallel=True)
def _rows(keys, n, lo, adj, start, pos):
    """Keys (any order) of nodes ``[lo, lo + m)`` -> per-node distinct-neighbour counts, the rows
    (ascending) written to the front of ``adj``, and how many: a counting sort by node (chunks of keys in
    parallel, at the positions :func:`_row_starts` gave), then each row sorted and de-duplicated on its own
    (rows in parallel)."""
    m = start.shape[0] - 1
    chunks = pos.shape[0]
    b = chunk_bounds(keys.shape[0], chunks)
    for c in numba.prange(chunks):
        for i in range(b[c], b[c + 1]):
            u = keys[i] // n - lo
            adj[pos[c, u]] = keys[i] - (u + lo) * n
            pos[c, u] += 1
    counts = np.zeros(m, dtype=np.int64)
    for r in numba.prange(m):
        a, b = start[r], start[r + 1]
        if b > a:
            adj[a:b] = np.sort(adj[a:b])
            k = a + 1
            for j in range(a + 1, b):
                if adj[j] != adj[k - 1]:
                    adj[k] = adj[j]
                    k += 1
            counts[r] = k - a
    k = 0
    for r in range(m):  # close the gaps the duplicates left (rows move left only)
        a = start[r]
        for j in range(counts[r]):
            adj[k + j] = adj[a + j]
        k += counts[r]
    return counts, k


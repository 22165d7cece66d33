"""The undirected, de-duplicated, self-loop-free adjacency (CSR) of a chunked graph, built out of core in
bounded memory, for partitioners that need each node's neighbours together (``assign --method stream``
and ``kaminpar`` on chunked input).

Node IDs are homogeneous: node types in the metadata's order, each type's IDs after the previous types'.
Three passes over the edge chunks' data, memory O(nodes) plus a buffer of ``memory_bytes``:

1. **degrees**: each node's number of adjacency entries (both directions, duplicates included) — an upper
   bound that sizes the buckets;
2. **distribute**: every entry ``(u, v)``, as the key ``u * n + v``, is appended to the bucket file of
   ``u``'s node range (ranges cut so a bucket's keys fit the buffer, and at most 2 M of them: small
   buckets keep the next pass in cache);
3. **sort**: bucket by bucket, keys are grouped by node, each row de-duplicated (and sorted if asked:
   KaMinPar gets ascending rows, Fennel does not need them), and the rows appended to ``xadj.bin``
   (int64, n + 1) and ``adjncy.bin`` (int32; int64 from 2**31 nodes on).

The bucket files take 16 bytes per directed edge of disk while the build runs and are deleted after.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

import numba
import numpy as np

from ..chunked.load import edge_offsets, read_checked_edges
from ..chunked.spec import ChunkedMeta
from ..jit import kernel
from ..partition.kernels import chunk_bounds, chunk_positions

log = logging.getLogger(__name__)
BYTES_PER_KEY = 12  # a bucket's keys (sorted in place) and its rows' neighbours (int32; int64 past 2**31 nodes)
BUCKET_KEYS = 1 << 21  # at most this many keys a bucket: its rows (8 MiB) stay in cache while they are filled
BLOCK_NODES = 1 << 20  # a block of :meth:`DiskCSR.blocks` holds at most this many nodes' rows


def bucket_keys(memory_bytes: int) -> int:
    """Keys per bucket: what the buffer holds, at most :data:`BUCKET_KEYS` (smaller buckets sort faster)."""
    return max(1, min(BUCKET_KEYS, memory_bytes // BYTES_PER_KEY))


def dedup_chunks() -> int:
    """Rows of marks the de-duplication keeps (one per parallel chunk of rows; n entries each)."""
    return max(1, min(4, numba.get_num_threads()))


@dataclass
class DiskCSR:
    """``adjncy[xadj[v]:xadj[v+1]]`` (files in ``directory``) are the distinct neighbours of ``v``
    (ascending if built so); ``in_degree`` (directed, as the chunks give the edges; kept only when asked for)."""

    directory: Path
    num_nodes: int
    num_entries: int
    id_dtype: np.dtype
    _: KW_ONLY
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
            step = BLOCK_NODES
            while lo < self.num_nodes:
                xs = self.xadj(lo, min(self.num_nodes, lo + step))
                cut = int(np.searchsorted(xs, xs[0] + max_entries, side="right")) - 1
                cut = max(cut, 1)
                block = xs[: cut + 1] - xs[0]
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


def build_disk_csr(
    meta: ChunkedMeta,
    directory: str | os.PathLike,
    memory_bytes: int = 1 << 30,
    in_degree: bool = False,
    *,
    ascending: bool = True,
) -> DiskCSR:
    """Build the adjacency of the chunked graph ``meta`` into ``directory`` (created; see the module
    docstring). ``memory_bytes`` bounds the sort buffer; ``in_degree``: also count directed in-degrees;
    ``ascending``: sort every row (else rows keep a deterministic order of first appearance)."""
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
    bounds = _bucket_bounds(degree, bucket_keys(memory_bytes))
    del degree
    times["degrees_s"] = time.perf_counter() - start
    start = time.perf_counter()
    buckets = [out / f"bucket-{b}.bin" for b in range(len(bounds) - 1)]
    _distribute_pass(meta, offsets, n, bounds, buckets=buckets)
    times["distribute_s"] = time.perf_counter() - start
    start = time.perf_counter()
    id_dtype = np.dtype(np.int32 if n < 2**31 else np.int64)
    entries = _sort_pass(out, buckets, bounds, n, id_dtype=id_dtype, ascending=ascending)
    times["sort_s"] = time.perf_counter() - start
    log.info("out-of-core adjacency of %d nodes, %d entries in %d buckets: %s", n, entries, len(buckets), times)
    return DiskCSR(out, n, entries, id_dtype, type_offsets=offsets, in_degree=indeg, timings=times)


def _sort_pass(
    out: Path, buckets: list[Path], bounds: np.ndarray, n: int, *, id_dtype: np.dtype, ascending: bool
) -> int:
    """Bucket by bucket (each file deleted once read), the rows appended to ``xadj.bin`` and ``adjncy.bin``;
    returns the number of entries."""
    marks = np.full((dedup_chunks(), n), -1, dtype=id_dtype)
    entries = 0
    with open(out / "xadj.bin", "wb") as fx, open(out / "adjncy.bin", "wb") as fa:
        fx.write(np.zeros(1, dtype=np.int64).tobytes())
        for b, path in enumerate(buckets):
            keys = np.fromfile(path, dtype=np.int64) if path.exists() else np.zeros(0, dtype=np.int64)
            path.unlink(missing_ok=True)
            adj = np.empty(keys.shape[0], dtype=id_dtype)
            rows_at, pos = _row_starts(keys, n, int(bounds[b]), int(bounds[b + 1]), threads=numba.get_num_threads())
            counts, kept = _rows(keys, n, int(bounds[b]), adj, rows_at, pos, marks, ascending)
            del keys
            fx.write((entries + np.cumsum(counts)).data)
            fa.write(adj[:kept].data)
            entries += kept
    return entries


def _distribute_pass(
    meta: ChunkedMeta, offsets: dict[str, int], n: int, bounds: np.ndarray, *, buckets: list[Path]
) -> None:
    """Append every chunk's keys to the files of their buckets (each opened per write: no limit on open
    files however many buckets there are)."""
    bucket_of = np.repeat(
        np.arange(len(buckets), dtype=np.int16 if len(buckets) < 2**15 else np.int32), np.diff(bounds)
    )
    for src, dst in _chunks(meta, offsets):
        keys, cuts = _distribute(src, dst, n, bucket_of, len(buckets), numba.get_num_threads())
        del src, dst
        for b in np.flatnonzero(np.diff(cuts)):
            with open(buckets[b], "ab") as f:
                f.write(keys[cuts[b] : cuts[b + 1]].data)
        del keys


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
def _distribute(src, dst, n, bucket_of, num_buckets, chunks):
    """Both directions' keys ``u * n + v`` (self-loops dropped), grouped by the bucket of ``u``
    (``bucket_of``: each node's bucket, a table look-up 2.3 x faster than a search of the boundaries);
    returns the keys and the bucket boundaries in them. Chunks of edges in parallel, each writing at
    positions counted beforehand."""
    b = chunk_bounds(src.shape[0], chunks)
    counts = np.zeros((chunks, num_buckets), dtype=np.int64)
    for c in numba.prange(chunks):
        for i in range(b[c], b[c + 1]):
            if src[i] != dst[i]:
                counts[c, bucket_of[src[i]]] += 1
                counts[c, bucket_of[dst[i]]] += 1
    pos, cuts = chunk_positions(counts)
    keys = np.empty(cuts[-1], dtype=np.int64)
    for c in numba.prange(chunks):
        for i in range(b[c], b[c + 1]):
            u, v = src[i], dst[i]
            if u != v:
                bu = bucket_of[u]
                keys[pos[c, bu]] = u * n + v
                pos[c, bu] += 1
                bv = bucket_of[v]
                keys[pos[c, bv]] = v * n + u
                pos[c, bv] += 1
    return keys, cuts


def _row_starts(keys: np.ndarray, n: int, lo: int, hi: int, *, threads: int) -> tuple[np.ndarray, np.ndarray]:
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
def _rows(keys, n, lo, adj, start, pos, marks, ascending):
    """Keys (any order) of nodes ``[lo, lo + m)`` -> per-node distinct-neighbour counts, the rows written to
    the front of ``adj``, and how many: a counting sort by node (chunks of keys in parallel, at the
    positions :func:`_row_starts` gave), then each row de-duplicated by marking its neighbours with the
    row's node in ``marks`` (one row of marks per chunk of rows, in parallel; linear, where sorting each
    row cost 4 x more on R-MAT) and sorted if ``ascending``. Without sorting a row keeps its keys' order,
    which depends on the chunks only, not the threads."""
    m = start.shape[0] - 1
    chunks = pos.shape[0]
    b = chunk_bounds(keys.shape[0], chunks)
    for c in numba.prange(chunks):
        for i in range(b[c], b[c + 1]):
            u = keys[i] // n - lo
            adj[pos[c, u]] = keys[i] - (u + lo) * n
            pos[c, u] += 1
    counts = np.zeros(m, dtype=np.int64)
    rows = chunk_bounds(m, marks.shape[0])
    for c in numba.prange(marks.shape[0]):
        mark = marks[c]
        for r in range(rows[c], rows[c + 1]):
            a, k = start[r], start[r]
            for j in range(start[r], start[r + 1]):
                v = adj[j]
                if mark[v] != lo + r:
                    mark[v] = lo + r
                    adj[k] = v
                    k += 1
            if ascending and k - a > 1:
                adj[a:k].sort()
            counts[r] = k - a
    k = 0
    for r in range(m):  # close the gaps the duplicates left (rows move left only)
        a = start[r]
        for j in range(counts[r]):
            adj[k + j] = adj[a + j]
        k += counts[r]
    return counts, k

"""Remote-feature cache: a read-only replica, on one rank, of the node-feature rows of other partitions
that its training batches read most often (by the access estimate of :mod:`.access`), so that lookups
fetch only the rows it misses.

Only rows of the partitioned node data are cached: they never change during a run. Learnable input rows
(:class:`~graphshard.distributed.remote.embedding.DistEmbedding`) do not go through the feature store and are
never cached, so they are never served stale. The cache is built once per run, after the partitions are
loaded (its build time is reported), and reaches sampler worker processes in shared memory.
"""

from __future__ import annotations

import logging
import time
from dataclasses import KW_ONLY, dataclass, field

import numpy as np
import torch

from ...errors import InputError
from ..host.counts import Counts
from .access import expected_reads
from .sampler import DENSE_SLOT_NODES, fanout_table

log = logging.getLogger(__name__)


@dataclass
class FeatureCache:
    """One rank's cache of the node-feature rows of other partitions its batches read most.

    Made by `build_cache`; a `DistFeatureStore` serves the rows it holds from it (``attach_cache``).

    Attributes:
        ids: node type → the cached nodes, sorted per-type IDs.
        rows: ``(node type, feature name)`` → the cached rows, in the order of ``ids``.
        counts: node type → its number of nodes (a slot map of 4 bytes a node up to ``DENSE_SLOT_NODES``,
            else a search of ``ids``).
        build_s: seconds the cache took to build.
        stats: ``lookups`` (rows of other partitions asked for) = ``hits`` + ``misses``; ``bytes_saved``.
    """

    ids: dict[str, np.ndarray]
    rows: dict[tuple[str, str], torch.Tensor]
    counts: dict[str, int]
    build_s: float = 0.0
    _: KW_ONLY
    stats: Counts = field(default_factory=lambda: Counts("lookups", "hits", "misses", "bytes_saved"))
    _slots: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_slots"] = {}  # rebuilt where needed, not sent
        return state

    @property
    def num_rows(self) -> int:
        return sum(int(v.shape[0]) for v in self.ids.values())

    @property
    def nbytes(self) -> int:
        return sum(v.numel() * v.element_size() for v in self.rows.values())

    def _rows_of(self, ntype: str, ids: np.ndarray) -> np.ndarray:
        """The cache row of each of ``ids`` (nodes of ``ntype``), -1 where it has none: through a slot per node of
        the type (4 bytes a node) up to :data:`DENSE_SLOT_NODES` nodes, beyond that by a binary search of the
        sorted cached IDs (O(cache), not O(graph), per rank)."""
        cached = self.ids[ntype]
        if self.counts[ntype] > DENSE_SLOT_NODES:
            if not cached.shape[0]:
                return np.full(ids.shape[0], -1, dtype=np.int64)
            at = np.minimum(np.searchsorted(cached, ids), cached.shape[0] - 1)
            return np.where(cached[at] == ids, at, -1)
        if ntype not in self._slots:
            slot = np.full(self.counts[ntype], -1, dtype=np.int32)
            slot[cached] = np.arange(cached.shape[0], dtype=np.int32)
            self._slots[ntype] = slot
        return self._slots[ntype][ids]

    def split(
        self, ntype: str, name: str, ids: np.ndarray, remote: np.ndarray
    ) -> tuple[np.ndarray, torch.Tensor | None, np.ndarray | None]:
        """Split a lookup of ``ids`` into the rows this cache serves and those still to fetch.

        Args:
            ntype: the node type of ``ids``.
            name: the feature's name.
            ids: per-type node IDs of the lookup.
            remote: True where the ID belongs to another partition (only those are served here).

        Returns:
            ``(hit positions, their rows, positions to fetch)``: the positions served here and their rows
            (None when none is), and the positions still to fetch (local rows and misses) in ascending order,
            or None when that is every position (nothing was served here).
        """
        rows = self.rows.get((ntype, name))
        asked = int(remote.sum())
        hit_pos = np.zeros(0, np.int64)
        if rows is not None and rows.shape[0] and asked:
            at = self._rows_of(ntype, ids)
            hit = remote & (at >= 0)
            hit_pos = np.flatnonzero(hit)
        if not hit_pos.size:
            self._count(asked, 0, 0)
            return hit_pos, None, None
        assert rows is not None, "hits come from the rows held (the branch above)"
        got = torch.index_select(rows, 0, torch.from_numpy(at[hit_pos].astype(np.int64)))
        self._count(asked, hit_pos.size, got.numel() * got.element_size())
        return hit_pos, got, np.flatnonzero(~hit)

    def _count(self, asked: int, hits: int, nbytes: int) -> None:
        self.stats.add(lookups=asked, hits=hits, misses=asked - hits, bytes_saved=nbytes)

    def share_memory_(self) -> FeatureCache:
        """Put the rows in shared memory (worker processes then map them instead of copying)."""
        for v in self.rows.values():
            v.share_memory_()
        return self


def cache_budget(ratio: float, megabytes: float, inner_nodes: int, row_bytes: int) -> int:
    """Rows the cache may hold: ``ratio`` × the partition's inner nodes, or ``megabytes`` of rows."""
    if ratio and megabytes:
        raise InputError("give the cache size as a ratio or in megabytes, not both")
    if ratio < 0 or megabytes < 0:
        raise InputError(f"cache size must be >= 0, got ratio {ratio}, {megabytes} MB")
    if megabytes:
        return int(megabytes * 1e6 // max(1, row_bytes))
    return int(round(ratio * inner_nodes))


def build_cache(
    g, seeds: dict[str, np.ndarray], fanouts, names: list[str], *, ratio: float = 0.0, megabytes: float = 0.0
) -> FeatureCache | None:
    """Choose and fetch the remote-feature cache of this rank of ``g``.

    The cache holds the rows of feature ``names`` of the remote nodes that training on ``seeds`` with
    ``fanouts`` is expected to read most, as many as the budget allows (``ratio`` × the partition's nodes or
    ``megabytes`` of rows; see `graphshard.distributed.remote.cache.cache_budget`). Collective over ``g``'s
    group (every member calls it, with its own seeds).

    Args:
        g (DistGraph): the distributed graph.
        seeds: node type → this rank's training seeds, per-type IDs.
        fanouts (list[int] | dict): the fanout of each hop, as the loaders' ``num_neighbors``.
        names: the node features to cache (CSR features are never cached).
        ratio: cache up to this many times the partition's nodes; give this or ``megabytes``.
        megabytes: cache up to this many megabytes of rows.

    Returns:
        The cache, or None when the budget is zero.

    Raises:
        InputError: both ``ratio`` and ``megabytes`` given, or a negative one.
    """
    start = time.perf_counter()
    # CSR features are fetched as their non-zeros, far smaller than the dense rows a cache would hold
    present = {t: [n for n in names if g.features.has(t, n) and not g.features.is_sparse(t, n)] for t in g.ntypes}
    row_bytes = max((sum(g.features.row_nbytes(t, n) for n in present[t]) for t in g.ntypes if present[t]), default=0)
    budget = cache_budget(ratio, megabytes, g.sampling_graph.count, row_bytes) if row_bytes else 0
    cache_ids, read, share = most_read(
        g, seeds, fanouts, [t for t in g.ntypes if present[t]], budget=budget, remote=True
    )
    rows = {(t, n): g.features.lookup(t, n, cache_ids[t]) for t in cache_ids for n in present[t]}
    g.group.barrier("remote-feature caches built")
    if budget == 0:
        return None
    cache = FeatureCache(cache_ids, rows, {t: g.num_nodes(t) for t in cache_ids}, time.perf_counter() - start)
    log.info(
        "remote-feature cache: %d rows (%.1f MB) of %d remote nodes read, expected %.0f%% of remote "
        "reads, built in %.2f s",
        cache.num_rows,
        cache.nbytes / 1e6,
        read,
        100 * share,
        cache.build_s,
    )
    return cache


def most_read(
    g, seeds: dict[str, np.ndarray], fanouts, types: list[str], *, budget: int, remote: bool
) -> tuple[dict[str, np.ndarray], int, float]:
    """The ``budget`` nodes of ``types`` that training on ``seeds`` (per-type IDs) with ``fanouts`` is expected
    to read most (by :func:`.access.expected_reads`; ``remote``: of other processes' partitions only), as sorted
    per-type IDs of each of ``types``; with the number of nodes read at all and the share of the reads the
    chosen take. Collective over ``g``'s group: every rank takes part in the estimate (it answers the others'
    requests), even with no budget itself."""
    book = g.get_partition_book()
    homo = [
        book.map_to_homo_nid(np.asarray(ids, dtype=np.int64), t).numpy()
        if len(g.ntypes) > 1
        else np.asarray(ids, dtype=np.int64)
        for t, ids in seeds.items()
    ]
    ids = np.concatenate(homo) if homo else np.zeros(0, np.int64)
    reads_ids, reads = expected_reads(
        g.group, g.sampling_graph, book, ids, fanouts=fanout_table(fanouts, g.canonical_etypes)
    )
    if remote:
        far = g.features.remote(book.nid2partid(reads_ids).numpy())  # co-located partitions are read in-process
        reads_ids, reads = reads_ids[far], reads[far]
    ntype, tid = (t.numpy() for t in book.map_to_per_ntype(reads_ids))
    cacheable = np.isin(ntype, [g.ntypes.index(t) for t in types])
    order = np.lexsort((reads_ids[cacheable], -reads[cacheable]))[:budget]  # most reads first, ties by ID
    chosen_type, chosen = ntype[cacheable][order], tid[cacheable][order]
    chosen_ids = {t: np.sort(chosen[chosen_type == g.ntypes.index(t)]) for t in types}
    share = float(reads[cacheable][order].sum() / max(reads.sum(), 1e-12))
    return chosen_ids, int(reads.size), share

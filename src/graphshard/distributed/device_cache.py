"""Choosing and loading a rank's device feature cache (:class:`~graphshard.device.rowcache.DeviceRowCache`):
the feature rows its training batches are expected to read most, its own partition's and others' alike (by
the access estimate of :mod:`.access`), as many as a budget in megabytes holds, copied to the device once."""

from __future__ import annotations

import logging
import time

import numpy as np
import torch

from ..device.rowcache import DeviceRowCache
from .access import expected_reads
from .cache import cache_budget
from .sampler import fanout_table

log = logging.getLogger(__name__)


def build_device_cache(
    g,
    seeds: dict[str, np.ndarray],
    fanouts,
    name: str,
    device: torch.device,
    ratio: float = 0.0,
    megabytes: float = 0.0,
) -> DeviceRowCache | None:
    """The device cache of this rank of ``g`` (a :class:`~.graph.DistGraph`) for training on ``seeds`` (per-type
    IDs) with ``fanouts``: rows of the dense feature ``name`` of the nodes with the most expected reads, on
    ``device``, as many as ``ratio`` × the partition's nodes or ``megabytes`` hold (see
    :func:`~.cache.cache_budget`). Collective over ``g``'s group (every member takes part in the estimate);
    None with no budget or no dense feature of that name."""
    start, book = time.perf_counter(), g.get_partition_book()
    present = [t for t in g.ntypes if g.features.has(t, name) and not g.features.is_sparse(t, name)]
    row_bytes = max((g.features.row_nbytes(t, name) for t in present), default=0)
    budget = cache_budget(ratio, megabytes, g.sampling_graph.count, row_bytes) if row_bytes else 0
    homo = [
        book.map_to_homo_nid(np.asarray(ids, dtype=np.int64), t).numpy()
        if len(g.ntypes) > 1
        else np.asarray(ids, dtype=np.int64)
        for t, ids in seeds.items()
    ]
    ids = np.concatenate(homo) if homo else np.zeros(0, np.int64)
    reads_ids, reads = expected_reads(g.group, g.sampling_graph, book, ids, fanout_table(fanouts, g.canonical_etypes))
    ntype, tid = (t.numpy() for t in book.map_to_per_ntype(reads_ids))
    cacheable = np.isin(ntype, [i for i, t in enumerate(g.ntypes) if t in present])
    order = np.lexsort((reads_ids[cacheable], -reads[cacheable]))[:budget]  # most reads first, ties by ID
    chosen_type, chosen = ntype[cacheable][order], tid[cacheable][order]
    cache_ids = {t: np.sort(chosen[chosen_type == i]) for i, t in enumerate(g.ntypes) if t in present}
    rows = {t: g.features.lookup(t, name, cache_ids[t]).to(device) for t in cache_ids}
    g.group.barrier("device feature caches built")
    if budget == 0:
        return None
    cache = DeviceRowCache(name, cache_ids, rows, {t: g.num_nodes(t) for t in cache_ids})
    cache.build_s = time.perf_counter() - start
    log.info(
        "device feature cache on %s: %d rows (%.1f MB), expected %.0f%% of reads, built in %.2f s",
        device,
        cache.num_rows,
        cache.nbytes / 1e6,
        100 * float(reads[cacheable][order].sum() / max(reads.sum(), 1e-12)),
        cache.build_s,
    )
    return cache

"""Choosing and loading a rank's device feature cache (:class:`~graphshard.device.rowcache.DeviceRowCache`):
the feature rows its training batches are expected to read most, its own partition's and others' alike (by
the access estimate of :mod:`.access`), as many as a budget in megabytes holds, copied to the device once."""

from __future__ import annotations

import logging
import time

import numpy as np
import torch

from ...device.rowcache import DeviceRowCache
from .cache import cache_budget, most_read

log = logging.getLogger(__name__)


def build_device_cache(
    g,
    seeds: dict[str, np.ndarray],
    fanouts,
    name: str,
    *,
    device: torch.device,
    ratio: float = 0.0,
    megabytes: float = 0.0,
) -> DeviceRowCache | None:
    """Choose and load the device feature cache of this rank of ``g``.

    The cache holds rows of the dense feature ``name`` of the nodes that training on ``seeds`` with
    ``fanouts`` is expected to read most (its own partition's and others' alike), on ``device``, as many as
    ``ratio`` × the partition's nodes or ``megabytes`` hold (see
    `graphshard.distributed.remote.cache.cache_budget`). Collective over ``g``'s group (every member takes
    part in the estimate).

    Args:
        g (DistGraph): the distributed graph.
        seeds: node type → this rank's training seeds, per-type IDs.
        fanouts (list[int] | dict): the fanout of each hop, as the loaders' ``num_neighbors``.
        name: the dense node feature to cache.
        device: the device the rows are copied to.
        ratio: cache up to this many times the partition's nodes; give this or ``megabytes``.
        megabytes: cache up to this many megabytes of rows.

    Returns:
        The cache (a `DeviceRowCache`), or None with no budget or no dense feature of that name.

    Raises:
        InputError: both ``ratio`` and ``megabytes`` given, or a negative one.
    """
    start = time.perf_counter()
    present = [t for t in g.ntypes if g.features.has(t, name) and not g.features.is_sparse(t, name)]
    row_bytes = max((g.features.row_nbytes(t, name) for t in present), default=0)
    budget = cache_budget(ratio, megabytes, g.sampling_graph.count, row_bytes) if row_bytes else 0
    cache_ids, _, share = most_read(g, seeds, fanouts, present, budget=budget, remote=False)
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
        100 * share,
        cache.build_s,
    )
    return cache

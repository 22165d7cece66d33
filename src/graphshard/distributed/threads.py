"""The CPU budget of one rank: the cores this process may run on, shared by the ranks of its host.

A rank's intra-op threads (PyTorch, numba) are capped at its share by default, so ranks on one machine
do not oversubscribe it; ``OMP_NUM_THREADS`` set by the user wins. A rank with cores to spare builds its
next batches in a background thread while it computes (see :mod:`.prefetch`); with one core per rank,
overlap only adds contention, so batches are built in-line."""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)


def cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def rank_threads() -> int:
    """This rank's share: ``cores() // LOCAL_WORLD_SIZE`` (at least 1), or ``OMP_NUM_THREADS`` when set."""
    forced = os.environ.get("OMP_NUM_THREADS", "")
    if forced.isdigit() and int(forced) > 0:
        return int(forced)
    return max(1, cores() // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)))


def apply_thread_budget() -> int:
    """Cap PyTorch's and numba's intra-op threads at :func:`rank_threads`; returns it."""
    import numba
    import torch

    n = rank_threads()
    torch.set_num_threads(n)
    # numba.config sets NUMBA_NUM_THREADS from the environment at import, through globals(): mypy cannot see it
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
    log.debug("intra-op threads per rank: %d", n)
    return n


def prefetch_depth() -> int:
    """Batches a training loader builds ahead in a background thread: 2 with a spare core, else 0."""
    return 2 if rank_threads() >= 2 else 0

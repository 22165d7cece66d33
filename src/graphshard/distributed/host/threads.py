"""The CPU budget of one rank: the cores this process may run on, shared by the ranks of its host.

A rank's intra-op threads (PyTorch, numba) are capped at its share by default, so ranks on one machine
do not oversubscribe it; ``OMP_NUM_THREADS`` set by the user wins. A rank with cores to spare, or whose
batches wait for other hosts' answers, builds its next batches in background threads while it computes
(see :mod:`.prefetch`); with one core per rank and every partition read in-process, overlap only adds
contention, so batches are built in-line. Builders of batches read in-process run at a lower CPU priority
than the rank's other threads (:func:`builder_nice`): the model's step comes first, and the builders take the
time it leaves. Builders whose batches ask other processes run at the step's priority: the link idles while such
a builder waits for the core to send its next requests. A thread holding the GIL hands it on after 1 ms, not
Python's 5 ms (:func:`switch_interval`), so the others get the interpreter back sooner."""

from __future__ import annotations

import logging
import os
import sys
import threading

from ...errors import InputError
from .settings import whole_number

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
    """Cap PyTorch's and numba's intra-op threads at :func:`rank_threads`, and hand the GIL on every
    :func:`switch_interval` seconds; returns the cap."""
    import numba
    import torch

    sys.setswitchinterval(switch_interval())
    n = rank_threads()
    # numba first: starting its OpenMP pool (the first set_num_threads) resets the OpenMP setting that PyTorch
    # shares (a rank forked before numba's pool started then ran PyTorch on every core: 6 x slower on 2 cores).
    # numba.config sets NUMBA_NUM_THREADS from the environment at import, through globals(): mypy cannot see it
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
    torch.set_num_threads(n)
    log.debug("intra-op threads per rank: %d", n)
    return n


_BUDGETED = threading.local()


def budget_this_thread() -> None:
    """Cap numba's threads at :func:`rank_threads` in the calling thread too (once per thread): numba's setting
    is per thread, so an RPC handler or a service's worker thread otherwise runs kernels on numba's default
    (every core), each call then waiting for threads that cannot get a core (measured on 2 shared cores: a
    sampling call of 8 µs took 140 µs to 7 ms)."""
    if getattr(_BUDGETED, "done", False):
        return
    import numba

    numba.set_num_threads(min(rank_threads(), numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
    _BUDGETED.done = True


def prefetch_depth(remote: bool = False) -> int:
    """Batches a training loader builds ahead in background threads: 2 with a spare core, 4 when its batches
    ask other hosts (``remote``: their answers are then awaited while the model computes, and a second
    builder may start, see :mod:`.prefetch`), else 0. Measured on 2 emulated hosts of 1 core each, the 32-d
    benchmark epoch: 4.89 and 4.90 s built ahead against 5.27 and 5.03 s in-line; on one host of 2 cores, 2
    ranks reading each other's partitions in-process, no change."""
    if remote:
        return 4
    return 2 if rank_threads() >= 2 else 0


MAX_BUILDERS = 2  # threads that may build a loader's batches at once (see .prefetch)


BUILDER_NICE_ENV = "GRAPHSHARD_BUILDER_NICE"
# Nice steps below the rank's other threads when every batch is read in-process (one host: 6.30 / 5.51 s
# against 7.16 / 5.54 s at 0; with one busy process per core 10.6 and 12.5 s against 12.9 and 13.6 s).
BUILDER_NICE = 10
# ... and when batches ask other processes. There a builder that waits for the core sends its next requests late and
# the link idles. 2 emulated hosts of 1 core each, 2 rounds alternated (0 / 4 / 10 steps): 128-d at 1 Gbit/s
# 13.76, 13.48 / 15.34, 16.14 / 16.08, 16.54 s; unshaped 10.77, 11.07 / 10.72, 10.89 / 10.44, 11.42 s; 32-d
# unshaped 5.70, 6.29 / 5.88, 6.00 / 5.83, 6.52 s.
REMOTE_BUILDER_NICE = 0


def builder_nice(remote: bool = False) -> int:
    """How many nice steps below the rank's other threads its batch builders run: ``GRAPHSHARD_BUILDER_NICE``
    (0 to 19; 0: the same priority), else :data:`REMOTE_BUILDER_NICE` when the batches ask other processes
    (``remote``) and :data:`BUILDER_NICE` when they are read in-process."""
    steps = whole_number(BUILDER_NICE_ENV, 19)
    if steps is None:
        return REMOTE_BUILDER_NICE if remote else BUILDER_NICE
    return steps


SWITCH_ENV = "GRAPHSHARD_SWITCH_INTERVAL"
# Python's default is 5 ms: a thread that wants the GIL (the step coming back from an operation, the thread that
# answers a peer) waits that long for a builder that holds it. 2 emulated hosts of 1 core each, 32-d, 4 pairs
# alternated: epoch 6.46 / 7.11 / 6.83 / 7.04 s at 1 ms against 7.29 / 7.69 / 7.14 / 7.93 s at 5 ms; 0.3 ms gave
# 6.67 / 7.04 s. In a later series of 4 pairs per cell, medians 8.21 / 8.23 s (2 hosts), 7.78 / 8.05 s (10 Gbit/s),
# 6.89 / 7.05 s (one host): a small gain.
SWITCH_INTERVAL = 0.001


def switch_interval() -> float:
    """Seconds a rank's thread may hold the GIL while another waits for it: ``GRAPHSHARD_SWITCH_INTERVAL``
    (more than 0, at most 0.1) or :data:`SWITCH_INTERVAL`."""
    text = os.environ.get(SWITCH_ENV, "").strip()
    if not text:
        return SWITCH_INTERVAL
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 0.1:
        raise InputError(
            f"{SWITCH_ENV}={text!r}: expected seconds, more than 0 and at most 0.1 (Python's default: 0.005)"
        )
    return seconds


def lower_this_thread(steps: int) -> None:
    """Run the calling thread ``steps`` nice steps lower (at most 19): on Linux a thread has its own nice value;
    elsewhere, or if the system refuses, nothing changes."""
    if steps <= 0:
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + steps))
    except (AttributeError, OSError):
        pass

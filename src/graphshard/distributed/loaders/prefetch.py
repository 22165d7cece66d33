"""Batches built ahead in background threads of the training process, so that sampling and feature
fetching (numba kernels, NumPy, waits for other processes' answers: mostly outside the GIL) overlap the
model's compute.

One builder thread starts. When the consumer keeps waiting for batches while the process leaves its cores
idle (the builder is waiting for other hosts' answers, not computing: a slow or busy link), a further
builder starts, up to ``max_builders``, so that the round trips of consecutive batches overlap. Where the
cores are busy, a second builder would only compete for them, so none starts. Each builder has its own
maker (samplers keep scratch state) and takes the next request in order, at most ``depth`` ahead of the
consumer. Batches arrive in request order and are the same as built in-line, whichever thread built them:
every request carries its own random key. A failure is raised in the consumer when its batch is due; a
consumer that stops early stops the threads; every wait is bounded. Builders of batches read in-process run
at a lower CPU priority than the consumer; builders whose batches ask other processes run at its priority, so
that their next requests go out while the model computes (see :func:`.threads.builder_nice`)."""

from __future__ import annotations

import logging
import resource
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..host.threads import builder_nice, lower_this_thread
from ..ranks.context import DistError

log = logging.getLogger(__name__)

WINDOW = 8  # batches between decisions to add a builder
STALLED = 0.2  # the consumer waited at least this share of the window's wall time ...
IDLE = 0.8  # ... while the process used at most this share of its cores


def wants_builder(waited: float, span: float, cpu: float, cores: int) -> bool:
    """Whether a further builder would help: over ``span`` seconds the consumer waited ``waited`` for its
    batches while the process used ``cpu`` seconds of its ``cores``."""
    return waited >= STALLED * span and cpu <= IDLE * cores * span


def _cpu_seconds() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


class _Builders:
    """The shared state: the next request to build, the built ones by index, the builder threads."""

    def __init__(self, maker: Callable[[int], Callable[[Any], Any]], requests: Sequence[Any], depth: int, nice: int):
        self.maker, self.requests, self.depth, self.nice = maker, requests, max(1, depth), nice
        self.cond = threading.Condition()
        self.next = self.consumed = 0
        self.done: dict[int, tuple[str, Any]] = {}
        self.threads: list[threading.Thread] = []
        self.stop = False

    def add(self) -> None:
        j = len(self.threads)
        t = threading.Thread(target=self._work, args=(self.maker(j),), name=f"graphshard-prefetch-{j}", daemon=True)
        self.threads.append(t)
        t.start()

    def _work(self, make: Callable[[Any], Any]) -> None:
        lower_this_thread(self.nice)
        while True:
            with self.cond:
                while not self.stop and self.next < len(self.requests) and self.next >= self.consumed + self.depth:
                    self.cond.wait(0.2)
                if self.stop or self.next >= len(self.requests):
                    return
                i, self.next = self.next, self.next + 1
            try:
                item: tuple[str, Any] = ("batch", make(self.requests[i]))
            except BaseException as exc:  # raised again in the consumer
                item = ("error", exc)
            with self.cond:
                self.done[i] = item
                self.cond.notify_all()
            if item[0] == "error":
                return

    def take(self, i: int, timeout: float, where: str) -> tuple[str, Any]:
        """Batch ``i`` once built. The builders' own waits are bounded (RPC timeouts name a silent peer), so
        this waits while one lives, up to a backstop of several timeouts."""
        deadline = time.monotonic() + 4 * timeout
        with self.cond:
            while i not in self.done:
                if not any(t.is_alive() for t in self.threads):
                    raise DistError(f"{where}the prefetch threads stopped without batch {i}")
                if time.monotonic() > deadline:
                    raise DistError(f"{where}waited {4 * timeout:.0f} s for the next batch")
                self.cond.wait(0.5)
            self.consumed = i + 1
            self.cond.notify_all()
            return self.done.pop(i)

    def close(self, timeout: float) -> None:
        with self.cond:
            self.stop = True
            self.cond.notify_all()
        for t in self.threads:
            t.join(timeout)


def prefetched(
    maker: Callable[[int], Callable[[Any], Any]],
    requests: Sequence[Any],
    depth: int,
    timeout: float,
    *,
    where: str = "",
    max_builders: int = 1,
    cores: int = 1,
    nice: int | None = None,
) -> Iterator[Any]:
    """``make(r)`` for every request, in order, built up to ``depth`` ahead by 1 to ``max_builders`` threads,
    builder ``j`` with ``make = maker(j)``. ``cores``: the process's share of the machine (to tell whether it
    is idle). ``nice``: steps below the consumer the builders run at (default :func:`.threads.builder_nice`)."""
    builders = _Builders(maker, requests, depth, builder_nice() if nice is None else nice)
    builders.add()
    wall, cpu, waited = time.perf_counter(), _cpu_seconds(), 0.0
    try:
        for i in range(len(requests)):
            start = time.perf_counter()
            kind, value = builders.take(i, timeout, where)
            waited += time.perf_counter() - start
            if kind == "error":
                raise value
            yield value
            if (i + 1) % WINDOW == 0:
                now, used = time.perf_counter(), _cpu_seconds()
                span = now - wall
                if len(builders.threads) < max_builders and wants_builder(waited, span, used - cpu, cores):
                    log.debug(
                        "%sanother batch builder: waited %.2f of %.2f s, CPU %.2f s", where, waited, span, used - cpu
                    )
                    builders.add()
                wall, cpu, waited = now, used, 0.0
    finally:
        builders.close(timeout)

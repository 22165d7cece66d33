"""Batches built ahead in a background thread of the training process, so that sampling and feature
fetching (numba kernels, NumPy, RPC waits: mostly outside the GIL) overlap the model's compute.

Batches arrive in request order and are the same as built in-line (one thread builds them all, in
order). A failure in the thread is raised in the consumer; a consumer that stops early stops the thread;
every wait is bounded."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .context import DistError


def prefetched(
    make: Callable[[Any], Any], requests: Iterable[Any], depth: int, timeout: float, where: str = ""
) -> Iterator[Any]:
    """``make(r)`` for every request, computed up to ``depth`` ahead in a background thread."""
    ready: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def offer(item: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for r in requests:
                if not offer(("batch", make(r))):
                    return
            offer(("end", None))
        except BaseException as exc:  # raised again in the consumer
            offer(("error", exc))

    thread = threading.Thread(target=work, name="graphshard-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = _next(ready, thread, timeout, where)
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        thread.join(timeout)


def _next(ready: queue.Queue, thread: threading.Thread, timeout: float, where: str) -> tuple[str, Any]:
    """The next item. The thread's own waits are bounded (RPC timeouts name a silent peer), so this waits
    while it lives, up to a backstop of several timeouts."""
    deadline = time.monotonic() + 4 * timeout
    while True:
        try:
            return ready.get(timeout=0.5)
        except queue.Empty:
            if not thread.is_alive() and ready.empty():
                raise DistError(f"{where}the prefetch thread stopped without a batch") from None
            if time.monotonic() > deadline:
                raise DistError(f"{where}waited {4 * timeout:.0f} s for the next batch") from None

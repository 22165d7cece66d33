"""Micro-batching: concurrent requests share one model batch.

Requests wait in a bounded queue; one thread takes the first, then whatever else is queued or arrives within
``wait`` seconds (up to ``max_nodes`` nodes), answers them together and hands each its rows. With no wait (the
default), a lone request is answered at once, and under load the requests that queued while a batch ran form
the next one. A full queue refuses at
once (:class:`Overloaded`: the service answers 503) rather than letting latency grow without end."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .queries import Query

log = logging.getLogger(__name__)

Done = Callable[[Any], None]  # called once with the rows of a query, or the exception that answers it


class Overloaded(Exception):
    """The queue is full: the request is refused (HTTP 503)."""


@dataclass
class Batch:
    """One model batch, for the metrics: how many queries and nodes it held and how long it took."""

    queries: int
    nodes: int
    seconds: float


class MicroBatcher:
    """``answer(queries)`` (one result per query: rows or an exception) run on batches of queued queries."""

    def __init__(
        self,
        answer: Callable[[list[Query]], list[Any]],
        max_nodes: int = 1024,
        wait: float = 0.0,
        max_queue: int = 256,
        *,
        on_batch: Callable[[Batch], None] | None = None,
    ):
        self.answer, self.max_nodes, self.wait = answer, max_nodes, wait
        self.on_batch = on_batch
        self._queue: queue.Queue[tuple[Query, Done, float]] = queue.Queue(max_queue)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="graphshard-serve-batcher", daemon=True)

    def start(self) -> MicroBatcher:
        self._thread.start()
        return self

    def depth(self) -> int:
        """Queries waiting now."""
        return self._queue.qsize()

    def submit(self, query: Query, done: Done, deadline: float = float("inf")) -> None:
        """Queue ``query``; ``done`` gets its result later, from the batcher's thread (nothing is computed for it
        once ``time.monotonic()`` has passed ``deadline``: its client has had its answer). :class:`Overloaded`
        when the queue is full."""
        try:
            self._queue.put_nowait((query, done, deadline))
        except queue.Full:
            raise Overloaded(f"the server is busy: {self._queue.maxsize} requests are waiting") from None

    def stop(self, within: float = 5.0) -> None:
        """Stop taking batches (the one in hand is finished, bounded by ``within``); queued queries are refused."""
        self._stop.set()
        self._thread.join(within)
        while True:
            try:
                _, done, _ = self._queue.get_nowait()
            except queue.Empty:
                return
            _hand(done, Overloaded("the server is stopping"))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                first = self._queue.get(timeout=0.2)  # bounded, so a stop is seen
            except queue.Empty:
                continue
            now = time.monotonic()
            batch = [item for item in self._gather(first) if item[2] > now]  # the others' clients have gone
            if batch:
                self._serve(batch)

    def _gather(self, first: tuple[Query, Done, float]) -> list[tuple[Query, Done, float]]:
        batch, nodes = [first], first[0].size
        deadline = time.monotonic() + self.wait
        while nodes < self.max_nodes:
            left = deadline - time.monotonic()
            try:
                item = self._queue.get_nowait() if left <= 0 else self._queue.get(timeout=left)
            except queue.Empty:
                break
            batch.append(item)
            nodes += item[0].size
        return batch

    def _serve(self, batch: list[tuple[Query, Done, float]]) -> None:
        start = time.perf_counter()
        try:
            results = self.answer([q for q, _, _ in batch])
        except Exception as exc:  # the batch failed as a whole: every query in it gets the error
            results = [exc] * len(batch)
        for (_, done, _), result in zip(batch, results):
            _hand(done, result)
        if self.on_batch is not None:
            self.on_batch(Batch(len(batch), sum(q.size for q, _, _ in batch), time.perf_counter() - start))


def _hand(done: Done, result: Any) -> None:
    try:
        done(result)
    except Exception:  # a client that left, an event loop already closed: nothing to hand over
        log.debug("could not hand a result over", exc_info=True)

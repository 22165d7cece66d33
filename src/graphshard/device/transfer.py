"""Batches to the device ahead of the model: every tensor of a batch (rows, labels, edge indices, edge features)
staged in a reused pinned buffer — rows the builder already gathered into one are not copied again — and copied
with ``non_blocking=True`` on a stream of its own while the model computes on the batch before, at least one
batch ahead, ordered by events: no device-wide synchronisation.

The bookkeeping tensors a trainer reads on the host (``n_id``, ``e_id``, ``input_id``) stay there. On a CPU
device nothing is copied (the batch is computed on where it is) unless ``copy_on_cpu`` asks for the device
path anyway, with a plain copy for the device copy: that is how machines without a GPU test it.

Timing, per batch and summed: ``copy_s`` (host seconds staging and issuing copies) and ``wait_s`` (the trainer
waiting for the loader to hand over a batch: when it is large, the device starves)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from .buffers import BufferPool
from .rowcache import DeviceRowCache
from .streams import CopyStream, compute_event, wait_host

HOST_ONLY = ("n_id", "e_id", "input_id")


@dataclass
class Moved:
    """A batch whose copies are issued: the copy stream's ``event`` after them, the device tensors."""

    batch: Any
    event: Any
    tensors: list[torch.Tensor] = field(default_factory=list)


class DeviceFeeder:
    """Iterates batches on ``device``, copying ``ahead`` batches ahead of the one handed out.

    ``prepare(batch)``, when given, runs on the host before the copies (to attach what the loss reads, such as
    the seeds' labels, so that it travels the same way). ``cache``: device rows that complete each batch's
    ``x`` (see :mod:`.rowcache`). ``inflight``: batches the host may run ahead of the device's compute
    before it waits for the oldest (bounds the device memory the batches hold)."""

    def __init__(
        self,
        device: torch.device,
        ahead: int = 1,
        prepare: Callable[[Any], None] | None = None,
        cache: DeviceRowCache | None = None,
        *,
        copy_on_cpu: bool = False,
        inflight: int = 3,
        pool: BufferPool | None = None,
    ):
        self.device, self.ahead, self.prepare, self.cache = device, max(1, ahead), prepare, cache
        self.copying = device.type != "cpu" or copy_on_cpu
        self.stream = CopyStream(device)
        self.pool = pool or BufferPool(pin=device.type == "cuda")
        self.inflight = max(1, inflight)
        self.copy_s = self.wait_s = 0.0
        self.copied_bytes = 0

    def reset(self) -> tuple[float, float, int]:
        """``(copy_s, wait_s, copied bytes)`` since the last reset, and start counting again."""
        out = (self.copy_s, self.wait_s, self.copied_bytes)
        self.copy_s = self.wait_s = 0.0
        self.copied_bytes = 0
        return out

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        if not self.copying:  # computed on where they are: no batch is taken ahead of the loader's own prefetch
            yield from self._through(batches)
            return
        it = iter(batches)
        pending: deque[Moved] = deque()
        computing: deque[Any] = deque()  # an event after each handed-out batch's step was issued

        def pull() -> bool:
            batch = self._next(it)
            if batch is not None:
                pending.append(self.move(batch))
            return batch is not None

        while len(pending) <= self.ahead and pull():
            pass
        while pending:
            moved = pending.popleft()
            self.stream.wait(moved.event, moved.tensors)
            yield moved.batch
            if self.device.type == "cuda":
                computing.append(compute_event(self.device))
                if len(computing) > self.inflight:
                    wait_host(computing.popleft())  # that step's event only
            pull()

    def _through(self, batches: Iterable[Any]) -> Iterator[Any]:
        it = iter(batches)
        while (batch := self._next(it)) is not None:
            yield self.move(batch).batch

    def _next(self, it: Iterator[Any]) -> Any:
        """The loader's next batch (None at the end), its wait added to ``wait_s``."""
        start = time.perf_counter()
        batch = next(it, None)
        self.wait_s += time.perf_counter() - start
        return batch

    def move(self, batch: Any) -> Moved:
        """Issue ``batch``'s copies (after ``prepare``); its tensors are replaced by the device's."""
        start = time.perf_counter()
        if self.prepare is not None:
            self.prepare(batch)
        if not self.copying:
            self.copy_s += time.perf_counter() - start
            return Moved(batch, None)
        staged, targets = [], []
        for store in batch.stores:
            for key, value in list(store.items()):
                if isinstance(value, torch.Tensor) and key not in HOST_ONLY:
                    staged.append(self._stage(value))
                    targets.append((store, key))
        moved: list[torch.Tensor] = []
        with self.stream.issuing():
            for (store, key), host in zip(targets, staged):
                dev = self._copy(host)
                store[key] = dev
                moved.append(dev)
                self.copied_bytes += host.numel() * host.element_size() if not host.is_sparse else 0
            if self.cache is not None:
                for store, ntype in _node_stores(batch):
                    self.cache.fill(store, ntype)
                    if "x" in store:
                        moved.append(store.x)
        event = self.stream.record()
        for host in staged:
            self.pool.give_back(host, event)
        self.copy_s += time.perf_counter() - start
        return Moved(batch, event, moved)

    def now(self, batch: Any) -> Any:
        """``batch`` on the device, ready for the current stream (for callers that compute one batch at a time,
        such as a server)."""
        moved = self.move(batch)
        self.stream.wait(moved.event, moved.tensors)
        return moved.batch

    def _stage(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` in a pool buffer (itself when it is one already; sparse tensors as they are)."""
        if t.is_sparse or not t.numel() or self.pool.owns(t):
            return t
        buf = self.pool.take(tuple(t.shape), t.dtype)
        buf.copy_(t)
        return buf

    def _copy(self, host: torch.Tensor) -> torch.Tensor:
        if self.device.type == "cpu":
            return host.clone()  # the device path on a CPU: a copy of its own, as the device would hold
        return host.to(self.device, non_blocking=True)


def _node_stores(batch: Any) -> list[tuple[Any, str | None]]:
    """``(store, node type)`` of every node store of a batch (None: a homogeneous batch's one store)."""
    if hasattr(batch, "node_types"):
        return [(batch[t], t) for t in batch.node_types]
    return [(batch, None)]

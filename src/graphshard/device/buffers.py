"""Host buffers reused from batch to batch: page-locked (pinned) where CUDA can use them, so that a copy to the
device runs asynchronously, from a DMA engine; plain memory on a machine without CUDA.

Pinning is slow (a system call and page faults per allocation), so buffers are kept and handed out again.
A buffer is one of a few size classes (powers of two of bytes from 64 KiB), viewed as the shape and dtype
asked for. A buffer given back with an event (the copy that reads it) is reused only once that copy is done.
Thread-safe: batch builders take buffers while the trainer gives them back."""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import torch

from .streams import done, wait_host

SMALLEST = 1 << 16  # bytes of the smallest size class


def size_class(nbytes: int) -> int:
    """The bytes of the buffer that holds ``nbytes``: the next power of two, at least :data:`SMALLEST`."""
    return max(SMALLEST, 1 << max(0, math.ceil(math.log2(max(1, nbytes)))))


@dataclass
class PoolStats:
    """``made``: buffers allocated (pinned, where pinning); ``reused``: hand-outs of a kept buffer; ``bytes``:
    bytes held; ``waited``: hand-outs that waited for a copy reading the buffer to finish."""

    made: int = 0
    reused: int = 0
    bytes: int = 0
    waited: int = 0
    _: KW_ONLY
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


class BufferPool:
    """Reusable host buffers, pinned when ``pin``; at most ``limit`` bytes held (beyond it, a hand-out waits for
    the oldest buffer in flight of its class instead of making another)."""

    def __init__(self, pin: bool, limit: int = 4 << 30):
        self.pin, self.limit = pin, limit
        self.stats = PoolStats()
        self._free: dict[int, list[torch.Tensor]] = {}
        self._flight: dict[int, deque[tuple[torch.Tensor, Any]]] = {}
        self._owned: dict[int, torch.Tensor] = {}  # data_ptr of a buffer handed out -> the buffer
        self._lock = threading.Lock()

    def take(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """An uninitialised tensor of ``shape`` and ``dtype`` in a buffer of the pool."""
        nbytes = math.prod(shape) * torch.empty(0, dtype=dtype).element_size()
        if not nbytes:  # nothing to hold (an empty view has no address of its own to know it by)
            return torch.empty(shape, dtype=dtype)
        cls = size_class(nbytes)
        buf = self._reuse(cls)
        if buf is None:
            buf = torch.empty(cls, dtype=torch.uint8, pin_memory=self.pin)
            with self._lock:
                self.stats.made += 1
                self.stats.bytes += cls
        with self._lock:
            self._owned[buf.data_ptr()] = buf
        return buf[:nbytes].view(dtype).view(shape)

    def _reuse(self, cls: int) -> torch.Tensor | None:
        """A kept buffer of class ``cls``: a free one, one whose copy is done, or (at the limit) the oldest in
        flight once its copy is done; None when a new one is to be made."""
        with self._lock:
            flight = self._flight.setdefault(cls, deque())
            while flight and done(flight[0][1]):
                self._free.setdefault(cls, []).append(flight.popleft()[0])
            free = self._free.get(cls)
            if free:
                self.stats.reused += 1
                return free.pop()
            if not flight or self.stats.bytes + cls <= self.limit:
                return None
            buf, event = flight.popleft()
            self.stats.reused += 1
            self.stats.waited += 1
        wait_host(event)  # that copy only, outside the lock
        return buf

    def owns(self, t: torch.Tensor) -> bool:
        """Whether ``t`` starts a buffer handed out by this pool (and not given back yet)."""
        with self._lock:
            return t.data_ptr() in self._owned

    def give_back(self, t: torch.Tensor, event: Any = None) -> None:
        """Return the buffer ``t`` starts, to be reused once ``event`` (the copy reading it) is done."""
        with self._lock:
            base = self._owned.pop(t.data_ptr(), None)
            if base is not None:
                self._flight.setdefault(base.numel(), deque()).append((base, event))

    def allocator(self) -> Any:
        """``take`` as an allocator of ``(shape, dtype)`` (what the feature store asks for its batch rows)."""
        return self.take

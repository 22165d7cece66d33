"""A CUDA stream for copies beside the compute stream, ordered by events; on a CPU device, the same calls do
nothing (copies happen when they are issued, and an event is always done).

The pattern: the copier issues a batch's copies inside :meth:`CopyStream.issuing` and takes
:meth:`CopyStream.record`'s event; the trainer, before it computes on the batch, calls :meth:`CopyStream.wait`
with it, which makes the compute stream wait for the copies on the device, not the host."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch


class CopyStream:
    """The copy stream of ``device`` (a stream of its own on CUDA; nothing on a CPU)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"
        self.stream: Any = torch.cuda.Stream(device=device) if self.cuda else None

    @contextmanager
    def issuing(self) -> Iterator[None]:
        """Work issued inside runs on the copy stream."""
        if not self.cuda:
            yield
            return
        with torch.cuda.stream(self.stream):
            yield

    def record(self) -> Any:
        """An event marking the work issued on the copy stream so far (None on a CPU: all of it is done)."""
        return self.stream.record_event() if self.cuda else None

    def wait(self, event: Any, tensors: list[torch.Tensor] = ()) -> None:  # type: ignore[assignment]
        """Make the current (compute) stream wait for ``event`` on the device, and tell the allocator that
        ``tensors`` (made on the copy stream) are used on it (their memory is not reused until it is done)."""
        if not self.cuda or event is None:
            return
        current = torch.cuda.current_stream(self.device)
        current.wait_event(event)
        for t in tensors:
            for part in (t._indices(), t._values()) if t.is_sparse else (t,):  # a sparse tensor: its two parts
                part.record_stream(current)


def compute_event(device: torch.device) -> Any:
    """An event marking the work issued on ``device``'s current stream so far (None on a CPU)."""
    if device.type != "cuda":
        return None
    return torch.cuda.current_stream(device).record_event()


def done(event: Any) -> bool:
    """Whether the work before ``event`` has finished (always, for None)."""
    return event is None or bool(event.query())


def wait_host(event: Any) -> None:
    """Block this thread until ``event`` is done (that event only: not a device-wide synchronisation)."""
    if event is not None:
        event.synchronize()

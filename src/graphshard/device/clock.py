"""What a training step costs on its device, and its loss, without waiting for the device each step.

On a CPU a step's time is the host's. On a GPU the host only issues the work, so the time between two events
recorded on the compute stream is the step's; the events (and the losses, kept on the device) are read once,
at the end of the epoch, after one wait for the stream: no synchronisation per step."""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch


class StepClock:
    """Seconds the steps of an epoch computed, and their losses, on ``device``."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self._pairs: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self._open: torch.cuda.Event | None = None
        self._started = 0.0
        self._host = 0.0
        self._losses: list[torch.Tensor] = []

    def start(self) -> None:
        """A step begins (its work is issued after this)."""
        if self.cuda:
            self._open = torch.cuda.Event(enable_timing=True)
            self._open.record()
        else:
            self._started = time.perf_counter()

    def stop(self, loss: torch.Tensor) -> None:
        """The step's work is issued; ``loss`` is its loss (kept as it is, read at :meth:`collect`)."""
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            assert self._open is not None, "stop() follows start()"
            self._pairs.append((self._open, end))
        else:
            self._host += time.perf_counter() - self._started
        self._losses.append(loss.detach())

    def collect(self) -> tuple[float, torch.Tensor]:
        """The seconds the steps since the last collect computed, and their losses (float64, on the host): one
        wait for the device's stream, then nothing; starts again from zero."""
        losses = (
            torch.stack(self._losses).to(torch.float64).cpu() if self._losses else torch.zeros(0, dtype=torch.float64)
        )
        if self.cuda:  # the copy above waited for the stream: every event is done
            seconds = sum(a.elapsed_time(b) for a, b in self._pairs) / 1000.0
        else:
            seconds = self._host
        self._pairs, self._losses, self._host = [], [], 0.0
        return seconds, losses


COUNT_SYNCS = "GRAPHSHARD_COUNT_SYNCS"  # set to 1: each epoch records its synchronising device operations


@contextmanager
def counted_syncs(device: torch.device) -> Iterator[list[int]]:
    """Count the operations inside that make the host wait for ``device`` (torch's sync debug mode: copies to
    the host, ``.item()``, ...), when :data:`COUNT_SYNCS` is set and the device is a GPU; yields a one-item list
    that holds the count once the block ends (0 otherwise)."""
    count = [0]
    if device.type != "cuda" or os.environ.get(COUNT_SYNCS) != "1":
        yield count
        return
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode(1)
        try:
            yield count
        finally:
            torch.cuda.set_sync_debug_mode(previous)
            count[0] = sum("synchroniz" in str(w.message) for w in caught)

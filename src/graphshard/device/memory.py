"""A device's memory: how much it has, and a device out of memory told in one line (the rank, the device, what
the rank was doing, how much was in use, and what to lower) instead of a CUDA stack trace."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from ..errors import DeviceMemoryError

LOWER = "lower --batch-size, --fanouts or --cache-mb, or use --precision bf16-mixed"


def device_bytes(device: torch.device) -> int:
    """The memory of ``device`` (0 for a CPU, or when it cannot be read)."""
    if device.type != "cuda":
        return 0
    return int(torch.cuda.get_device_properties(device).total_memory)


def in_use(device: torch.device) -> int:
    """Bytes torch holds on ``device`` now (0 for a CPU)."""
    return int(torch.cuda.memory_reserved(device)) if device.type == "cuda" else 0


@contextmanager
def named_out_of_memory(rank: int, device: torch.device, doing: Callable[[], str]) -> Iterator[None]:
    """Turn a device's out-of-memory error inside into a :class:`DeviceMemoryError` naming ``rank``, ``device``,
    the phase (``doing()``, e.g. "training epoch 3, batch 17") and what to lower."""
    try:
        yield
    except torch.OutOfMemoryError:
        held, total = in_use(device) / 2**30, device_bytes(device) / 2**30
        raise DeviceMemoryError(
            f"rank {rank} ran out of memory on {device} while {doing() or 'starting'} ({held:.1f} GiB held by "
            f"torch of {total:.1f} GiB): {LOWER}, or start fewer ranks per device"
        ) from None

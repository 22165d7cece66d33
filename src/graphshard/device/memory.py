"""A device's memory: how much it has, and a device out of memory told in one line (the rank, the device, what
the rank was doing, how much was in use, and what to lower) instead of a CUDA stack trace."""

from __future__ import annotations

import os
import subprocess
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


def capacity(index: int) -> int:
    """The memory of visible CUDA device ``index``, read without creating a CUDA context in this process (a
    launcher that made one would hold device memory for the whole run): through NVML's command line,
    ``nvidia-smi``, with ``CUDA_VISIBLE_DEVICES`` mapped to physical indices; 0 when it cannot be read."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    physical = index
    if visible is not None:
        ids = [v.strip() for v in visible.split(",") if v.strip()]
        if index >= len(ids) or not ids[index].isdigit():
            return 0  # UUIDs or MIG names: not mapped here
        physical = int(ids[index])
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--id={physical}", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
        return int(float(out.strip().splitlines()[0])) << 20  # MiB
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return 0

"""Counts declared by input files, checked before anything is allocated from them: a typo of 10**12
nodes is an error naming the key, not a machine brought down by a 16 TB allocation."""

from __future__ import annotations

import os
from typing import Any

from .errors import InputError

# bytes per node that any graphshard step holds at the least (an ID map and a mask or assignment)
BYTES_PER_NODE = 16


def physical_memory_bytes() -> int:
    """This machine's physical memory (a very large number where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 1 << 62


def check_count(value: Any, where: str, error: type[Exception] = InputError) -> int:
    """A declared number of nodes: a non-negative integer whose per-node arrays fit this machine."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise error(f"{where}: must be a non-negative integer, got {value!r}")
    limit = physical_memory_bytes() // BYTES_PER_NODE
    if value > limit:
        raise error(
            f"{where}: {value} nodes would need {(value * BYTES_PER_NODE + 2**29) // 2**30} GiB for per-node "
            f"arrays alone, more than this machine has ({limit} nodes at most); is the count right?"
        )
    return value

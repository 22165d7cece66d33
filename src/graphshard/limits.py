"""Counts declared by input files, checked before anything is allocated from them: a typo of 10**12
nodes is an error naming the key, not a machine brought down by a 16 TB allocation."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

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


# the largest value of each compact integer type (module constants, so a test can lower INT32_MAX to see the
# int64 path without a graph of 2**31 items)
INT8_MAX, INT16_MAX, INT32_MAX = 2**7 - 1, 2**15 - 1, 2**31 - 1


def smallest_int(lo: int, hi: int, least: Any = np.int8) -> np.dtype:
    """The smallest signed integer dtype, ``least`` or wider, holding every value of ``[lo, hi]``: int8, int16,
    int32 or int64 (partition files store IDs in int32 when they fit, type IDs in int8, ...)."""
    start = np.dtype(least).itemsize
    for dtype, top in ((np.int8, INT8_MAX), (np.int16, INT16_MAX), (np.int32, INT32_MAX)):
        if np.dtype(dtype).itemsize >= start and -top - 1 <= lo and hi <= top:
            return np.dtype(dtype)
    return np.dtype(np.int64)

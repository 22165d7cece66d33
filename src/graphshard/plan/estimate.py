"""One prediction of the planner."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Estimate:
    """A predicted peak of private (anonymous) memory of one process (``method``: the assignment method, or
    which rank of a step), its extra disk, the phase at the peak, and the partition files it memory-maps
    (page cache the kernel may drop under pressure, counted apart)."""

    method: str
    peak_bytes: int
    disk_bytes: int
    phase: str  # the phase at the peak
    mapped_bytes: int = 0

"""Memory arithmetic every step shares: the machine's memory, sizes as users write them (``16G``), the budget
a step may use, one predicted peak (:class:`Estimate`), and how messages show bytes."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from pathlib import Path

from .errors import InputError


@dataclass(frozen=True)
class Estimate:
    """A predicted peak of private (anonymous) memory of one process (``method``: the assignment method, or
    which rank of a step), its extra disk, the phase at the peak, and the partition files it memory-maps
    (page cache the kernel may drop under pressure, counted apart)."""

    method: str
    peak_bytes: int
    disk_bytes: int
    phase: str  # the phase at the peak
    _: KW_ONLY
    mapped_bytes: int = 0


def machine_memory() -> int:
    """This machine's memory (bytes), from /proc/meminfo; 0 when unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def allowed(memory: int | str | None = None) -> int:
    """The memory a step may use: ``memory`` (bytes, or a size such as ``16G``; see :func:`parse_size`), or,
    when it is not given (None, 0, empty), this machine's memory (0 when unknown: nothing is refused)."""
    if isinstance(memory, str) and memory:
        return parse_size(memory)
    return int(memory) if memory else machine_memory()


def parse_size(text: str) -> int:
    """``24G``, ``512M``, ``1.5T`` or plain bytes -> bytes; raises :class:`InputError`."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1] if t and t[-1] in units else ""
    try:
        value = float(t[: len(t) - len(unit)])
    except ValueError:
        raise InputError(f"memory size {text!r}: expected a number with an optional unit K, M, G or T") from None
    if not value > 0:
        raise InputError(f"memory size {text!r} must be positive")
    return int(value * units[unit])


def gib(b: int) -> str:
    """``b`` bytes as the planner's messages and tables show them (``1.25 GiB``)."""
    return f"{b / 2**30:.2f} GiB"

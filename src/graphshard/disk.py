"""Disk arithmetic every step shares: where a directory's bytes land (its file system and the free space there),
one predicted peak of disk (:class:`DiskNeed`), and the check a step runs before it writes anything.

A step is refused when its predicted peak plus a margin (:data:`MARGIN_FRACTION` of the prediction and
:data:`MARGIN_BYTES`: other writers, file-system metadata, blocks) exceeds the free space of the file system
it writes to; ``check_disk=False`` (``--no-disk-check``) skips the check."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InputError

MARGIN_FRACTION = 0.05  # a step needs its predicted peak and 5 % of it free ...
MARGIN_BYTES = 64 << 20  # ... and 64 MiB more
FILE_BYTES = 8 << 10  # a written file beyond its data: header, metadata, the last block partly used


@dataclass(frozen=True)
class DiskNeed:
    """A step's predicted peak of disk (``peak_bytes``) in the directory ``path``, and what the peak is made of
    (``parts``: name -> bytes, in the order the message lists them). ``step`` names it in messages."""

    step: str
    path: Path
    parts: dict[str, int] = field(default_factory=dict)

    @property
    def peak_bytes(self) -> int:
        return sum(self.parts.values())

    def breakdown(self) -> str:
        """``partitions 30.10 GiB + staging 0.00 GiB``."""
        return " + ".join(f"{k} {size(v)}" for k, v in self.parts.items() if v) or "nothing"


def size(b: int) -> str:
    """``b`` bytes as disk messages show them: ``41.20 GiB``, ``12.5 MiB``, ``3 KiB``."""
    if abs(b) >= 1 << 30:
        return f"{b / 2**30:.2f} GiB"
    if abs(b) >= 1 << 20:
        return f"{b / 2**20:.1f} MiB"
    return f"{b / 2**10:.0f} KiB"


def existing(path: str | os.PathLike) -> Path:
    """``path``, or its nearest existing ancestor (where a directory still to be created will land)."""
    p = Path(path).expanduser().absolute()
    for where in (p, *p.parents):
        if where.exists():
            return where
    return Path(p.anchor or "/")


def free_space(path: str | os.PathLike) -> int:
    """Bytes this user may still write on the file system holding ``path`` (``shutil.disk_usage``)."""
    return shutil.disk_usage(existing(path)).free


def mount_point(path: str | os.PathLike) -> Path:
    """The mount point of the file system holding ``path`` (how the planner names the file system)."""
    p = existing(path).resolve()
    dev = p.stat().st_dev
    while p != p.parent and p.parent.stat().st_dev == dev:
        p = p.parent
    return p


def margin(need: int) -> int:
    """What must be free beyond a predicted ``need``."""
    return int(MARGIN_FRACTION * need) + MARGIN_BYTES


def fits(need: DiskNeed, free: int | None = None) -> bool:
    """Whether ``need`` and its margin fit the free space where it lands (``free``: that space, if known)."""
    free = free_space(need.path) if free is None else free
    return need.peak_bytes + margin(need.peak_bytes) <= free


def check_disk(need: DiskNeed, check: bool = True, hint: str = "") -> None:
    """Raise :class:`InputError` when ``need`` (with its margin) does not fit the free space of the file system it
    lands on; ``check=False`` skips it (``--no-disk-check``). Costs one ``statvfs``."""
    if not check or need.peak_bytes == 0:
        return
    free = free_space(need.path)
    if fits(need, free):
        return
    raise InputError(
        f"{need.step} needs about {size(need.peak_bytes)} on {need.path} ({need.breakdown()}), "
        f"{size(free)} free there (the check keeps {size(margin(need.peak_bytes))} of margin); free some space, "
        f"write elsewhere{hint}, or skip the check with --no-disk-check (check_disk=False) if you know better"
    )

"""Measuring what the planner predicts: the peak private (anonymous) memory of each process a command
starts, sampled from ``/proc`` (Linux). Used to calibrate the planner (``benchmarks/plan_calibration.py``)
and by its tests; also handy to check a prediction on your own machine."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from ..errors import InputError


def process_tree(root: int) -> list[int]:
    """``root`` and its descendants, from ``/proc``."""
    kids: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                kids.setdefault(int((p / "stat").read_text().rsplit(")", 1)[1].split()[1]), []).append(int(p.name))
            except (OSError, ValueError, IndexError):
                continue
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += kids.get(pid, [])
    return out


def private_bytes(pid: int) -> int:
    """Resident private (anonymous) memory of process ``pid`` now."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    return 0


def peak_private(cmd: list[str], interval: float = 0.01, parents: dict[int, int] | None = None) -> dict[int, int]:
    """Run ``cmd`` and return the peak private memory of each process it started (the command's own process
    included), sampled every ``interval`` seconds (a shorter spike can be missed); ``parents``, when given,
    is filled with each process's parent. Raises :class:`InputError` with its error output when the command
    fails."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peaks: dict[int, int] = {}
    while proc.poll() is None:
        for pid in process_tree(proc.pid):
            try:
                peaks[pid] = max(peaks.get(pid, 0), private_bytes(pid))
                if parents is not None and pid not in parents:
                    parents[pid] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
        time.sleep(interval)
    if proc.returncode:
        assert proc.stderr is not None  # opened with stderr=PIPE
        raise InputError(f"{' '.join(cmd)} failed: {proc.stderr.read().strip()[-2000:]}")
    return peaks


def leaf_peaks(cmd: list[str], least: int = 100 << 20) -> list[int]:
    """The peaks of :func:`peak_private` of the processes that started no other (a launcher's ranks, not the
    launcher nor its fork server), at least ``least`` bytes (not multiprocessing's helpers), in start order."""
    parents: dict[int, int] = {}
    peaks = peak_private(cmd, parents=parents)
    started = set(parents.values())
    return [peaks[p] for p in sorted(peaks) if p not in started and peaks[p] >= least]

"""A process's peak resident memory, for tests that measure what a step adds (Linux's /proc)."""

from __future__ import annotations

from pathlib import Path

import pytest

needs_peak_reset = pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc/self/clear_refs"
)


def peak_rss() -> int:
    """This process's peak resident memory (VmHWM), in bytes."""
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))) * 1024


def restart_peak() -> int:
    """Start the peak again from what the process holds now; returns that."""
    Path("/proc/self/clear_refs").write_text("5")
    return peak_rss()

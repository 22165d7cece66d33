"""Where a training run's time goes, end to end: seconds per phase in this process, and the closing
account that joins the launcher's phases (partitioning, starting processes, shutting down) with rank 0's
(start-up, training epochs, evaluation, embeddings, checkpoints).

Every rank is a separate process: the phases are module state, reset when a rank starts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

PHASES = (
    "command_s",
    "partition_s",
    "compile_s",
    "spawn_s",
    "startup_s",
    "epochs_s",
    "evaluation_s",
    "embeddings_s",
    "checkpoint_s",
    "shutdown_s",
)
LABELS = {
    "command_s": "starting the command",
    "partition_s": "partitioning",
    "compile_s": "kernel compilation",
    "spawn_s": "starting processes",
    "startup_s": "start-up",
    "epochs_s": "training epochs",
    "evaluation_s": "evaluation",
    "embeddings_s": "embeddings",
    "checkpoint_s": "checkpoints",
    "shutdown_s": "shutdown",
}

_SPENT: dict[str, float] = {}
_STARTED: list[float] = []
_COMMAND: list[float] = []  # perf_counter's reading when this process started, if it is the graphshard command


def command_started() -> None:
    """Note that this process is the ``graphshard`` command (called first thing): its account then starts
    when the process did, so the interpreter's start and the imports are counted (``command_s``)."""
    age = process_age()
    if age is not None:
        _COMMAND[:] = [time.perf_counter() - age]


def forget_command() -> None:
    """Start the account at ``train()`` after all: the command did work of its own first, which it reports
    itself (``demo``: generating and partitioning its graph)."""
    _COMMAND.clear()


def since_command(now: float) -> float | None:
    """Seconds from this process's start to ``now`` (a perf_counter reading), if it is the command."""
    return now - _COMMAND[0] if _COMMAND else None


def process_age() -> float | None:
    """Seconds since this process started (Linux: its start time in ``/proc``, against the boot clock), or
    None where that cannot be read."""
    import os
    from pathlib import Path

    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def reset() -> None:
    """Start this process's account now."""
    _SPENT.clear()
    _STARTED[:] = [time.perf_counter()]


def training_starts() -> None:
    """Close start-up (processes joined, partitions loaded, caches built, model ready): call once, when
    the first epoch begins."""
    if _STARTED and "startup_s" not in _SPENT:
        _SPENT["startup_s"] = time.perf_counter() - _STARTED[0]


@contextmanager
def phase(name: str, account: dict[str, float] | None = None) -> Iterator[None]:
    """Add the time spent inside to phase ``name`` of this process's account (or of ``account``)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        add(name, time.perf_counter() - start, account)


def add(name: str, seconds: float, account: dict[str, float] | None = None) -> None:
    spent = _SPENT if account is None else account
    spent[name] = spent.get(name, 0.0) + seconds


def rank_account() -> dict[str, float]:
    """This rank's phases so far."""
    return dict(_SPENT)


def closing_account(rank: dict[str, float], total: float, **launcher: float | None) -> dict[str, float]:
    """The whole run's account: the launcher's phases (``command_s``, ``partition_s``, ``compile_s``,
    ``spawn_s``, ``shutdown_s``) and rank 0's; ``other_s`` is what no phase accounts for."""
    account = {k: float(v) for k, v in launcher.items() if v is not None}
    account.update({k: float(v) for k, v in rank.items() if k in PHASES})
    account["total_s"] = total
    account["other_s"] = max(0.0, total - sum(account.get(k, 0.0) for k in PHASES))
    return account


def describe(account: dict[str, Any]) -> str:
    """``12.3 s end to end = partitioning 1.0 + ... + other 0.1``."""
    parts = [f"{LABELS[k]} {account[k]:.1f}" for k in PHASES if account.get(k)]
    parts.append(f"other {account.get('other_s', 0.0):.1f}")
    return f"{account['total_s']:.1f} s end to end = " + " + ".join(parts)

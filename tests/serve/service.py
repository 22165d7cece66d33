"""Start ``graphshard serve`` as a real process (its own process group) and stop it on every path."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

READY = re.compile(r"graphshard: serving .* on (http://\S+) with")


@contextmanager
def running(args: list[str], cwd: Path, ready_within: float = 120.0) -> Iterator[tuple[str, subprocess.Popen]]:
    """``graphshard serve ARGS`` (``--port 0``): yields its base URL once it answers, and the process; stopped
    with SIGINT (then killed, bounded) however the block ends."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphshard.cli", "serve", *args, "--port", "0"],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        yield _await_ready(proc, ready_within), proc
    finally:
        stop(proc)


def _await_ready(proc: subprocess.Popen, within: float) -> str:
    assert proc.stdout is not None
    deadline, seen = time.monotonic() + within, []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        line = proc.stdout.readline() if ready else ""
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        found = READY.search(line)
        if found:
            return found.group(1)
    err = proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
    raise AssertionError(f"graphshard serve did not start: {''.join(seen)}{err}")


def stop(proc: subprocess.Popen, within: float = 20.0) -> tuple[int, str]:
    """SIGINT to the service's process group; killed if still there ``within`` seconds later. Its exit code and
    standard error."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    try:
        _, err = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=10)
    return proc.returncode, err or ""

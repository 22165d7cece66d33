"""Processes that never outlive the process that started them: a rank whose launcher was killed, or a
sampler worker whose rank died, exits at once instead of waiting for peers that will never come."""

from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int | None = None) -> None:
    """Ask Linux to kill this process when its parent dies. With ``parent_pid``, also exit at once if the
    parent is already gone (it may have died before the request was made). A no-op off Linux."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)

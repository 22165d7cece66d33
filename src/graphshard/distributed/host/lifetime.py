"""Processes that never outlive the process that started them: a rank whose launcher was killed, or a
sampler worker whose rank died, exits at once instead of waiting for peers that will never come."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import threading

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int | None = None) -> None:
    """Ask Linux to kill this process when its parent dies. With ``parent_pid``, also exit at once if the
    parent is already gone (it may have died before the request was made). A process whose parent is not
    ``parent_pid`` (a rank forked by a fork server, see :mod:`.forkserver`) watches ``parent_pid`` itself
    from a thread and is killed as soon as it ends. A no-op off Linux."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if parent_pid is None or os.getppid() == parent_pid:
        return
    try:
        watched = os.pidfd_open(parent_pid)
    except ProcessLookupError:
        os._exit(1)
    except (OSError, AttributeError):  # no pidfd (Linux before 5.3): its parent's death is all it has
        return
    threading.Thread(target=_killed_with, args=(watched,), name="graphshard-parent", daemon=True).start()


def _killed_with(watched: int) -> None:
    select.select([watched], [], [])  # readable once the process ends
    os.kill(os.getpid(), signal.SIGKILL)  # as the parent-death signal would


# Exit code of a spawned process that found itself re-running its parent's start-up code (no main guard).
UNGUARDED_EXIT = 86


def refuse_spawn_reimport() -> None:
    """Call before starting processes or joining a run. A process started with ``spawn`` first re-imports the
    script that started it (as ``__mp_main__``); if that script starts processes at its top level, without
    an ``if __name__ == "__main__":`` guard, the child would start them again (and hang or fail obscurely).
    Such a child exits at once with :data:`UNGUARDED_EXIT`, which its parent turns into
    :func:`unguarded_message`."""
    import multiprocessing

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        os._exit(UNGUARDED_EXIT)


def unguarded_message(who: str) -> str:
    """What to tell the user when ``who`` (a rank, a sampler worker) exited with :data:`UNGUARDED_EXIT`."""
    import sys

    script = getattr(sys.modules.get("__main__"), "__file__", None) or "your script"
    return (
        f"{who} re-ran the start-up code of {script} when it imported it: the script starts processes (or "
        'joins a run) at its top level. Put that code under `if __name__ == "__main__":` — spawned '
        "processes import the script that started them, and the guard keeps them from running it again"
    )

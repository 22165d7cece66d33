"""Other processes as this one sees them through ``/proc`` (whether one handles a signal yet, whether it went
quiet), and ending this one at once: what :mod:`.interrupt`, the launcher and the rank workers share."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

RELEASE_WAIT = 0.3  # seconds an ending process spends releasing its semaphores


def handles(pid: int, signum: int = signal.SIGTERM) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (a process still starting has none yet: one
    started by :func:`.interrupt.starting_children` only acts on the signal once it has), or is gone."""
    try:
        caught = Path(f"/proc/{pid}/status").read_text().split("SigCgt:")[1].split()[0]
    except (OSError, IndexError):
        return True
    return bool(int(caught, 16) & (1 << (signum - 1)))


def is_quiet(pid: int) -> bool:
    """Whether process ``pid`` has silenced its standard error (or is gone)."""
    try:
        return os.readlink(f"/proc/{pid}/fd/2") == os.devnull
    except OSError:
        return True


def exit_now(code: int, flush: bool = True) -> None:
    """End the process at once with ``code``: nothing of a half-stopped run (its threads, its transports'
    destructors) runs at exit. Its named semaphores are released first (else the multiprocessing resource
    tracker warns of them), within a bound; ``flush``: also flush what it printed (only from the main
    thread: the watcher never waits on the streams' locks)."""
    if flush:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    releasing = threading.Thread(target=_release_semaphores, name="graphshard-exit", daemon=True)
    releasing.start()
    releasing.join(RELEASE_WAIT)  # a lock held by a blocked thread must not keep the process alive
    os._exit(code)


def _release_semaphores() -> None:
    """What the interpreter's exit would run for multiprocessing's semaphores and queues."""
    try:
        from multiprocessing import util

        util._run_finalizers(0)  # type: ignore[attr-defined]  # private: typeshed's stubs omit it
    except Exception:
        pass


# The tracker removes the semaphores of a rank that had to be killed (frozen, hung) and warns about them as
# "leaked" on its way out: noise after the one line that names the lost rank, so it is told not to.
_TRACKER_QUIET = "ignore::UserWarning:multiprocessing.resource_tracker"


def start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker now (started later, it would unblock SIGINT and SIGTERM behind
    our back), without its warning about the semaphores of killed ranks, which it cleans up anyway."""
    from multiprocessing import resource_tracker

    before = os.environ.get("PYTHONWARNINGS")
    os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [before, _TRACKER_QUIET]))
    try:
        resource_tracker.ensure_running()
    finally:
        if before is None:
            os.environ.pop("PYTHONWARNINGS", None)
        else:
            os.environ["PYTHONWARNINGS"] = before

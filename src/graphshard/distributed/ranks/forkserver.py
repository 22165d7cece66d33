"""How the launcher starts its ranks: forked from a fork server that imported torch, PyG and the ranks' code
once, rather than each rank spawned as a fresh interpreter that imports them again.

A spawned rank spends ~3 s importing (2 ranks: ~4 s on 2 cores) before it does anything; forked from the
server, it starts in a fraction of a second, and a process that launches again (a notebook, a test suite, a
service restarting its ranks) pays the import once. The server is multiprocessing's own: one per launching
process, started on the first launch (with the signals blocked, see :func:`.interrupt.starting_children`),
ending when that process does. A forked rank would see the server's state from when it started, so what can
change between launches comes with each rank instead: the launcher's environment, and its standard output
and error as they are now (:class:`Inherited`); its working directory and ``sys.path`` travel with
multiprocessing's own start-up data, as under spawn. Where there is no fork server (not Linux), ranks are
spawned.
"""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import sys
from collections.abc import Callable
from typing import Any

# Imported once by the server, before it forks any rank: the heavy imports every rank makes.
PRELOAD = ("torch", "torch_geometric")
SERVER_END_WAIT = 5.0  # seconds a killed server may take to end


def start_early(modules: tuple[str, ...] = ()) -> bool:
    """Start this process's fork server now, so that it imports :data:`PRELOAD` (and ``modules``: the ranks'
    code, and what they import at their start) while this process does its own imports and checks; returns
    whether it started one.

    A command that will launch ranks calls this first: its ranks then fork from a server that is ready (on two
    cores the two imports overlap) instead of waiting for a server started at the launch. Without a fork
    server (not Linux), nothing happens. Once it runs, :func:`start_method` changes nothing about it.
    """
    from multiprocessing import forkserver

    from . import interrupt

    if not sys.platform.startswith("linux") or "forkserver" not in multiprocessing.get_all_start_methods():
        return False
    multiprocessing.get_context("forkserver").set_forkserver_preload([*PRELOAD, *modules])
    with interrupt.starting_children():  # the server begins with the signals blocked, as at a launch
        forkserver.ensure_running()
    # told to stop before the launch, the command kills the server (busy importing, with the signals blocked, it
    # would end seconds later); the launch takes over (see start_method)
    _EARLY.append(interrupt.when_signalled(stop_server))
    return True


_EARLY: list[Callable[[], None]] = []  # the unhook of start_early's stop_server, until a launch takes over


def _launch_takes_over() -> None:
    while _EARLY:
        _EARLY.pop()()


def helper_context(module: str) -> Any:
    """The multiprocessing context for the helper processes a rank starts (sampler workers): forked from a fork
    server of this process that imported :data:`PRELOAD` and graphshard's ``module`` once (started by the
    first helper), rather than each helper spawned as an interpreter that imports them again (~3 s each);
    ``spawn`` where there is no fork server (not Linux)."""
    if not sys.platform.startswith("linux") or "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([*PRELOAD, module])  # no effect once it runs (a launcher's: it preloaded those)
    return context


def start_method(fn: Callable[..., Any]) -> str:
    """``"forkserver"`` on Linux, its server told (before it starts) to import :data:`PRELOAD` and, if it is
    graphshard's, ``fn``'s module (a user's module is imported by each rank, as under spawn: its import-time
    code never runs in the server); else ``"spawn"``."""
    if not sys.platform.startswith("linux") or "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    _launch_takes_over()  # the launch stops the server itself while its ranks start, and not after
    module = getattr(fn, "__module__", None) or ""
    preload = [*PRELOAD, *([module] if module.startswith("graphshard.") else [])]
    multiprocessing.get_context("forkserver").set_forkserver_preload(preload)  # no effect once it runs
    return "forkserver"


class Inherited:
    """File descriptor ``fd`` of the launcher, handed to a rank as it starts (it arrives as the rank's own
    descriptor number, an ``int``, which the rank closes once it has used it)."""

    def __init__(self, fd: int):
        self.fd = fd

    def __reduce__(self) -> tuple:
        from multiprocessing.reduction import DupFd

        return (_received, (DupFd(self.fd),))  # pickled while the rank starts: the fd goes with it


def _received(dup: Any) -> int:
    return dup.detach()


def leave_server() -> None:
    """In a rank the server forked: close the rank's copy of the launcher's end of the server's lifeline (every
    child gets one), so that the server ends when the launcher does, and the rank with it (its parent is the
    server: see :func:`.lifetime.die_with_parent`). Without this, a rank whose launcher was killed would keep
    the server, and so itself, alive."""
    from multiprocessing import forkserver

    server: Any = forkserver._forkserver  # the module's singleton (private; typeshed omits the fd)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if fd is not None:
        os.close(fd)
        server._forkserver_alive_fd = None


def stop_server() -> None:
    """Kill this process's fork server, if it runs (a signal while the ranks start: the server may still be
    importing :data:`PRELOAD`, seconds of work with the signals blocked, while the launcher waits for it). A
    launcher waiting for a rank's pid then sees the server's end at once; the ranks it forked already die with
    it (their parent). The next launch starts a new server (multiprocessing reaps the dead one)."""
    from multiprocessing import forkserver

    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    if pid is None:
        return
    try:
        ended = os.pidfd_open(pid)
        os.kill(pid, signal.SIGKILL)
    except OSError:  # gone already, and reaped
        return
    try:  # until it has ended, so that the next launch sees it gone (it reaps it and starts another)
        select.select([ended], [], [], SERVER_END_WAIT)
    finally:
        os.close(ended)

"""Start a local cluster: ``num_procs`` ranks on loopback (or a given address) with a free port.

The parent hosts the rendezvous store (bound to port 0, so the port is free by construction) and starts the
ranks (forked from a fork server that imported their code once, see :mod:`.forkserver`). If a rank fails, the
others are terminated and :class:`DistError` names the rank that caused it: one that recorded its own error,
else one that exited without a word (killed). Interrupted (SIGINT, SIGTERM, Ctrl-C), the parent sends SIGTERM
to every rank, kills those still there :data:`STOP_GRACE` seconds later, and raises the interruption (see
:mod:`.interrupt`).
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any

from ..host.lifetime import UNGUARDED_EXIT, die_with_parent, refuse_spawn_reimport, unguarded_message
from ..host.processes import exit_now, handles
from ..transport.handshake import SECRET_ENV, SECRET_FILE_ENV, new_secret
from ..transport.network import host_store
from . import interrupt
from .context import ERROR_KEY, PEER_FAILURE, STOPPED, DistError
from .forkserver import Inherited, leave_server, start_method, stop_server

if TYPE_CHECKING:
    from torch.multiprocessing.spawn import ProcessException, ProcessExitedException, ProcessRaisedException

STOP_GRACE = 3.0  # seconds interrupted ranks have to end before they are killed


def _entry(
    index: int,
    fn: Callable[..., Any],
    args: tuple,
    host: str,
    port: int,
    world: int,
    parent: int,
    environ: dict[str, str],
    stdio: tuple[int, int] | None,
) -> None:
    die_with_parent(parent)  # a killed launcher takes its ranks with it: none waits on a dead store
    if stdio is not None:  # forked by the fork server: leave it its own lifetime; write where the launcher writes now
        leave_server()
        for fd, target in zip(stdio, (1, 2)):
            os.dup2(fd, target)
            os.close(fd)
    os.environ.clear()  # the launcher's environment as it is now, not as it was when the fork server started
    os.environ.update(environ)
    os.environ.update(
        {
            "RANK": str(index),
            "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(index),
            "LOCAL_WORLD_SIZE": str(world),
            "MASTER_ADDR": host,
            "MASTER_PORT": str(port),
            "GRAPHSHARD_STORE_HOSTED": "1",
        }
    )
    with interrupt.handled(speak=False):  # the launcher says the line
        try:
            fn(*args)
        except BaseException as exc:
            stopped = interrupt.signal_of(exc)
            if stopped is None:
                raise
            exit_now(128 + stopped)  # unwound: end quietly (torch would count an interrupt a success)


def launch(
    fn: Callable[..., Any],
    num_procs: int,
    args: tuple = (),
    host: str = "127.0.0.1",
    *,
    timeout: float = 300.0,
    lead_only: bool = False,
) -> None:
    """Run ``fn(*args)`` in ``num_procs`` new processes that see torchrun-style environment variables.

    The variables are ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``; this process
    hosts the rendezvous store on a free port. If a rank fails, the others are stopped. Interrupted (SIGINT,
    SIGTERM, Ctrl-C), it stops every rank and raises the interruption.

    Args:
        fn: the function each rank runs (it usually joins the run with `session`).
        num_procs: the number of ranks, at least 1.
        args: the arguments of ``fn``.
        host: the address the rendezvous store listens on (the ranks' ``MASTER_ADDR``).
        timeout: seconds the store waits for the ranks.
        lead_only: only rank 0 ending ends the run (a service whose rank 0 goes on without a lost rank:
            ``graphshard serve``); otherwise any rank that fails does.

    Raises:
        DistError: ``num_procs`` is below 1, or a rank failed; names the rank that caused it (one that
            recorded its own error, else one that exited without a word).
    """
    refuse_spawn_reimport()
    import torch.distributed as dist
    import torch.multiprocessing as mp

    if num_procs < 1:
        raise DistError(f"num_procs must be >= 1, got {num_procs}")
    store = host_store(host, 0, num_procs, timeout)  # listens on ``host`` only (see .network)
    procs, method = None, None
    ended_first: dict[int, int] = {}  # the ranks that failed first, by themselves, and their exit codes
    try:
        with interrupt.longer_grace(STOP_GRACE + 1.5):  # time to stop the ranks before this process ends
            try:
                method = start_method(fn)
                stdio = (Inherited(1), Inherited(2)) if method == "forkserver" else None
                forget = interrupt.when_signalled(stop_server) if method == "forkserver" else None
                try:
                    with interrupt.starting_children():  # each rank acts on a signal once its handlers are in place
                        procs = mp.start_processes(
                            _entry,
                            args=(fn, args, host, store.port, num_procs, os.getpid(), _child_environ(), stdio),
                            nprocs=num_procs,
                            join=False,
                            start_method=method,
                        )
                finally:
                    if forget is not None:
                        forget()
                _supervise(procs, lead_only, ended_first=ended_first)
            except KeyboardInterrupt:  # Interrupted (SIGINT, SIGTERM) or Ctrl-C without graphshard's handlers
                if procs is not None:
                    _stop(procs.processes)
                if method == "forkserver":  # ended now rather than by its lifeline, after its own slow teardown
                    stop_server()
                raise
    except (mp.ProcessRaisedException, mp.ProcessExitedException) as exc:
        assert procs is not None, "raised by its join, in _supervise"
        raise DistError(
            _root_cause(dist.PrefixStore("graphshard/", store), procs.processes, exc, ended_first=ended_first)
        ) from None
    finally:
        # The error's traceback keeps this frame (and the cycle through ``exc``) until the garbage collector
        # runs: the store would go on listening after ``launch`` returned. Drop it now.
        del store


def _supervise(procs: Any, lead_only: bool = False, *, ended_first: dict[int, int] | None = None) -> None:
    """Wait for every rank to end; after a failure, stop the others (torch's join raises it). With ``lead_only``,
    the ranks but the first may end (fail) while it runs. ``ended_first`` receives the ranks that failed
    before any was stopped here, with their exit codes (a signal's is negative)."""
    while True:
        running = [p for p in procs.processes if p.exitcode is None]
        ended = wait([p.sentinel for p in running]) if running else []  # until a rank ends
        for p in running:
            if p.sentinel in ended:
                p.join(5)  # its sentinel closes just before it can be reaped: its exit code, not a guess
        if ended_first is not None and not ended_first:
            first = {r: p.exitcode for r, p in enumerate(procs.processes) if p in running and p.exitcode}
            ended_first.update({r: code for r, code in first.items() if code is not None})
        if lead_only and procs.processes[0].exitcode is None:
            continue  # another rank ended: rank 0 goes on without it, and says so
        _stop_all_after_a_failure(procs.processes)  # before torch's join, which would wait 30 s on a stopped rank
        if procs.join(timeout=0):
            break


def _stop(processes: list, grace: float = STOP_GRACE) -> None:
    """SIGTERM to every rank still running; those not gone ``grace`` seconds later are killed. A rank still
    starting (no handler yet: it has joined nothing and written nothing) is killed at once, rather than
    waited for while it imports what it would stop at once."""
    for p in processes:
        if p.is_alive():
            p.terminate()
            if not handles(p.pid):
                p.kill()
    _kill_after(processes, grace)


def _stop_all_after_a_failure(processes: list, grace: float = 3.0) -> None:
    """Once a rank has failed, give the others ``grace`` seconds to finish reporting, then kill those still
    there (a stopped or hung rank ignores SIGTERM: torch's own clean-up would wait 30 s for it)."""
    if any(p.exitcode not in (None, 0) for p in processes):
        _kill_after(processes, grace)


def _kill_after(processes: list, grace: float) -> None:
    """Wait up to ``grace`` seconds for ``processes`` to end, then kill and reap those still there."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        running = [p.sentinel for p in processes if p.exitcode is None]
        if not running:
            break
        wait(running, timeout=max(0.0, deadline - time.monotonic()))  # until one ends, or the deadline
    for p in processes:
        if p.is_alive():
            p.kill()
        p.join(5)


def run_script(path: str, argv: list[str]) -> None:
    """Run a Python file as ``__main__`` with ``sys.argv = [path, *argv]`` (one rank of ``graphshard launch``).

    Args:
        path: the Python file to run.
        argv: its command-line arguments.
    """
    import runpy
    import sys

    sys.argv = [path, *argv]
    runpy.run_path(path, run_name="__main__")


def mp_exceptions() -> tuple[type[ProcessRaisedException], type[ProcessExitedException]]:
    import torch.multiprocessing as mp

    return mp.ProcessRaisedException, mp.ProcessExitedException


def _ending(code: int) -> str:
    """How a process ended, from its exit code: a signal by its name (never an empty reason)."""
    if code < 0:
        try:
            return f"died by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"died by signal {-code}"
    return f"exited with code {code}"


def _root_cause(store: Any, processes: list, exc: ProcessException, *, ended_first: dict[int, int]) -> str:
    reports = {}
    for r in range(len(processes)):
        key = f"{ERROR_KEY}{r}"
        if store.check([key]):
            reports[r] = store.get(key).decode(errors="replace")
    own = [r for r, text in reports.items() if PEER_FAILURE not in text and STOPPED not in text]
    if own:
        return f"rank {own[0]} failed: {reports[own[0]]}"
    for r, text in reports.items():  # only survivors spoke: name the peer they lost
        gone = re.search(r"rank(\d+)(?:-sampler(\d+))? (?:is gone|did not answer)", text)
        if gone:
            rank = int(gone.group(1))
            code = processes[rank].exitcode if rank < len(processes) else None
            stopped = code == -signal.SIGTERM or rank in reports  # by us, or by itself on a peer's failure
            if code is not None and not stopped:  # the rank itself ended
                return f"rank {rank} {_ending(code)} mid-run; seen by rank {r}: {text}"
            who = f"sampler worker {gone.group(2)} of rank {rank}" if gone.group(2) else f"rank {rank}"
            return f"{who} died (its connection closed); seen by rank {r}: {text}"
    for r, text in reports.items():  # a survivor's heartbeat found a rank lost: its line says it all
        found = re.search(r"lost rank (\d+)|rank \d+ on host \S+ failed", text)
        if found:
            line = text.split(f"{PEER_FAILURE} ", 1)[-1]
            lost = int(found.group(1)) if found.group(1) else None
            code = processes[lost].exitcode if lost is not None and lost < len(processes) else None
            if code is not None and (code >= 0 or lost in ended_first):  # it ended by itself, without a word
                return f"rank {lost} {_ending(code)} mid-run; seen by rank {r}: {line}"
            return line
    signalled = [(r, code) for r, code in ended_first.items() if code < 0 and r not in reports]
    if signalled:  # died by a signal of its own (an abort, a crash in native code), before we stopped anyone
        return f"rank {signalled[0][0]} {_ending(signalled[0][1])} without reporting an error"
    if isinstance(exc, mp_exceptions()[0]):  # raised without a DistContext: torch sends the traceback
        lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
        return f"rank {exc.error_index} failed: {lines[-1] if lines else exc}"
    silent = [
        (r, p.exitcode)
        for r, p in enumerate(processes)
        if r not in reports and p.exitcode not in (0, None) and p.exitcode > 0
    ]
    unguarded = [r for r, code in silent if code == UNGUARDED_EXIT]
    if unguarded:
        return unguarded_message(f"rank {unguarded[0]}")
    if silent:
        return f"rank {silent[0][0]} exited with code {silent[0][1]} without reporting an error"
    return f"rank {exc.error_index} failed:\n{exc}"


def _child_environ() -> dict[str, str]:
    """The ranks' environment: this process's, with a fresh job secret unless one was given."""
    env = dict(os.environ)
    if not env.get(SECRET_ENV) and not env.get(SECRET_FILE_ENV):
        env[SECRET_ENV] = new_secret()
    return env

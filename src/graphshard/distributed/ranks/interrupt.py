"""Stop means stop: SIGINT or SIGTERM ends a command, and every rank of its run, within seconds, quietly,
with one line.

A command runs inside :func:`handled`: the first SIGINT or SIGTERM raises :class:`Interrupted` in the main
thread (later ones are ignored: the first is being acted on), which unwinds through every ``with`` and
``finally`` as Ctrl-C's ``KeyboardInterrupt`` does; the command then says one line (:meth:`Stop.farewell`)
and exits with 128 + the signal's number (130, 143). A main thread blocked in C++ (a collective, an RPC
wait) cannot raise until the call returns, so a watcher thread, woken by the signal itself
(:func:`signal.set_wakeup_fd`), ends the process :attr:`Stop.grace` seconds later whatever it is doing,
saying the same line.

Quiet: a run's processes stop together, and each one's transports (gloo) log every connection
a peer closes. So at the signal a process first silences its standard error (the line goes to the saved
terminal), then tells its peers so (:func:`when_signalled`: the heartbeat carries it, see :mod:`.liveness`;
a peer on the same host also sees it in ``/proc``, :func:`is_quiet`), and closes nothing (it raises
nothing) until its peers are quiet too or :data:`QUIET_WAIT` seconds passed (:func:`before_unwinding`). A
sampler worker (``handled(unwind=False)``) only goes quiet: its rank ends it.

:func:`deferred` marks a section that is never cut in two (a checkpoint every rank commits, or none):
a signal within it is raised when it ends, and :func:`atomic` makes the watcher wait (briefly) for the
renames that commit it. Processes started within :func:`starting_children` begin with the signals
blocked (the mask is inherited across fork and exec), so a signal during their start-up (imports) is not
a traceback: they act on it once their own handlers are in place.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import KW_ONLY, dataclass, field

from ..host.processes import exit_now, start_resource_tracker
from ..transport.liveness import write_error_file

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGINT, signal.SIGTERM)
GRACE = 2.0  # seconds from the signal to the process's end, whatever its main thread is blocked in
QUIET_WAIT = 1.0  # seconds a process waits for its peers to go quiet before it closes its connections
ATOMIC_WAIT = 0.5  # seconds the watcher waits for an atomic step (renames) to finish

# Run (once, from the first thread to see the signal) after standard error is silenced: tell the peers.
SIGNALLED: list[Callable[[], None]] = []
# Run before the interruption is raised: wait (bounded) for the peers to be quiet.
BEFORE_UNWINDING: list[Callable[[], None]] = []


class Interrupted(KeyboardInterrupt):
    """This process was asked to stop (SIGINT or SIGTERM). A ``KeyboardInterrupt``, so no ``except
    Exception`` swallows it and code that handles Ctrl-C handles it too."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@dataclass
class Stop:
    """The state of one :func:`handled` block: the signal received, if any, and how to say so.

    ``describe()``: the line to say (without ``graphshard: ``); ``speak``: whether this process says it
    (one process per terminal: the launcher, or local rank 0 under torchrun), or a function that tells;
    ``unwind``: raise :class:`Interrupted` in the main thread (else only go quiet and end after ``grace``)."""

    describe: Callable[[], str] | None = None
    speak: bool | Callable[[], bool] = True
    grace: float = GRACE
    unwind: bool = True
    _: KW_ONLY
    signum: int | None = None
    depth: int = 0  # nesting of deferred sections
    terminal: int | None = None  # the standard error as it was, once silenced
    quiet: bool = False  # silenced, and the peers told
    waited: bool = False  # the peers' quiet awaited
    said: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    quiet_lock: threading.RLock = field(default_factory=threading.RLock)
    atomic_lock: threading.Lock = field(default_factory=threading.Lock)
    say_lock: threading.Lock = field(default_factory=threading.Lock)

    def farewell(self, signum: int) -> int:
        """Say the line once (and write it to torchrun's error file); returns the exit code."""
        with self.say_lock:
            if not self.said:
                self.said = True
                line = f"graphshard: {_safe(self.describe)}"
                log.info("%s (%s)", line, signal.Signals(signum).name)  # the run log, if any: stderr is silenced
                if self.describe is not None:  # a command's process (not a launcher's rank, nor a worker)
                    write_error_file(line)
                if self.speak() if callable(self.speak) else self.speak:
                    _write_terminal(self, line)
        return 128 + signum


_CURRENT: list[Stop] = []


def current() -> Stop | None:
    return _CURRENT[-1] if _CURRENT else None


def pending() -> int | None:
    """The signal this process was asked to stop by, if any."""
    stop = current()
    return stop.signum if stop is not None else None


def signal_of(exc: BaseException) -> int | None:
    """The signal behind ``exc``: an :class:`Interrupted`'s, or the one this process was told to stop by
    (its peers stop too, so what fails meanwhile fails because of that; a handler's exception raised inside
    C++ may even be lost there)."""
    return exc.signum if isinstance(exc, Interrupted) else pending()


def raise_if_pending() -> None:
    """Raise :class:`Interrupted` if a signal arrived (for code in a :func:`deferred` section that cannot
    go on, e.g. a collective that failed because the peers stopped)."""
    stop = current()
    if stop is not None and stop.signum is not None:
        _raise(stop)


@contextmanager
def handled(
    describe: Callable[[], str] | None = None,
    speak: bool | Callable[[], bool] = True,
    grace: float = GRACE,
    unwind: bool = True,
) -> Iterator[Stop]:
    """Run the block with SIGINT and SIGTERM handled as the module's docstring says; the previous handlers
    come back after it. Outside the main thread, the block runs as it is."""
    stop = Stop(describe, speak, grace, unwind)
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    read, write = os.pipe()
    os.set_blocking(write, False)
    # a signal ignored by whoever started us (nohup, a script's background job) stays ignored
    previous = {s: signal.signal(s, _handler) for s in SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}
    old_wakeup = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    _CURRENT.append(stop)
    watcher = threading.Thread(target=_watch, args=(stop, read), name="graphshard-interrupt", daemon=True)
    watcher.start()
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)  # we may have been started with them blocked
        yield stop
    finally:
        stop.done.set()
        signal.set_wakeup_fd(old_wakeup)
        for s, h in previous.items():
            signal.signal(s, h)
        _CURRENT.remove(stop)
        os.close(write)  # the watcher reads the end of the pipe and leaves
        watcher.join(1.0)
        os.close(read)
        _restore_terminal(stop)


def _handler(signum: int, frame: object) -> None:
    stop = current()
    if stop is None or stop.signum is not None:
        return  # the first signal is being acted on
    stop.signum = signum
    if stop.unwind and stop.depth == 0:
        _raise(stop)


def _raise(stop: Stop) -> None:
    """Go quiet, let the peers go quiet (bounded), then raise the interruption."""
    _quiet(stop)
    if not stop.waited:
        stop.waited = True
        for wait in list(BEFORE_UNWINDING):
            wait()
    assert stop.signum is not None, "every caller acts on a signal received (it is never unset)"
    raise Interrupted(stop.signum)


def _watch(stop: Stop, read: int) -> None:
    """Wait for a signal (the wakeup fd's byte, written even while the main thread is blocked in C++), then
    go quiet at once and end the process if it is still there ``grace`` seconds later."""
    while True:
        try:
            data = os.read(read, 64)
        except OSError:
            return
        if not data or stop.done.is_set():
            return
        signums = [b for b in data if b in SIGNALS]
        if signums:
            break
    _quiet(stop)
    start = time.monotonic()
    while time.monotonic() - start < stop.grace:  # the grace may grow meanwhile (see longer_grace)
        if stop.done.wait(0.05):
            return
    main = threading.main_thread().ident
    assert main is not None, "the main thread started this one: it has an ident"
    frame = sys._current_frames().get(main)
    log.info(
        "ending the process %.1f s after the signal; its main thread was at %s",
        stop.grace,
        f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "its end",
    )
    if stop.atomic_lock.acquire(timeout=ATOMIC_WAIT):  # an atomic step (renames) finishes first
        stop.atomic_lock.release()
    code = stop.farewell(stop.signum or signums[0])
    exit_now(code, flush=False)  # the main thread may hold the streams' locks


def _quiet(stop: Stop) -> None:
    """Silence standard error (the transports' C++ code writes to file descriptor 2 directly), then tell the
    peers (:data:`SIGNALLED`); once, from whichever thread comes first."""
    with stop.quiet_lock:
        if stop.quiet:
            return
        stop.quiet = True
        stop.terminal = os.dup(2)  # standard error is line-buffered: nothing of ours is lost
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
        for tell in list(SIGNALLED):
            try:
                tell()
            except Exception as exc:  # a peer we cannot tell will see the connection close
                log.debug("telling the peers failed: %s", exc)


def when_signalled(fn: Callable[[], None], first: bool = False) -> Callable[[], None]:
    """Call ``fn`` once this process is quiet after a signal (from the watcher thread, or the main thread if
    it sees the signal first); ``first``: before the others. Returns a function that unregisters it."""
    SIGNALLED.insert(0 if first else len(SIGNALLED), fn)
    return lambda: SIGNALLED.remove(fn) if fn in SIGNALLED else None


def before_unwinding(fn: Callable[[], None]) -> Callable[[], None]:
    """Call ``fn`` (a bounded wait) before the interruption is raised. Returns a function that unregisters it."""
    BEFORE_UNWINDING.append(fn)
    return lambda: BEFORE_UNWINDING.remove(fn) if fn in BEFORE_UNWINDING else None


@contextmanager
def deferred() -> Iterator[None]:
    """A section a signal does not cut in two: it is raised when the section ends (or at once by
    :func:`raise_if_pending`, where the section gives up). A failure in the section after a signal is
    raised as the interruption (the peers stopped: that is why it failed)."""
    stop = current()
    if stop is None:
        yield
        return
    stop.depth += 1
    try:
        yield
    except Exception:
        stop.depth -= 1
        if stop.depth == 0 and stop.signum is not None and stop.unwind:
            _raise(stop)
        raise
    except BaseException:
        stop.depth -= 1
        raise
    stop.depth -= 1
    if stop.depth == 0 and stop.signum is not None and stop.unwind:
        _raise(stop)


@contextmanager
def atomic() -> Iterator[None]:
    """A short step (renames) the watcher lets finish before it ends the process (it waits at most
    :data:`ATOMIC_WAIT` s). Use inside :func:`deferred`."""
    stop = current()
    if stop is None:
        yield
        return
    with stop.atomic_lock:
        yield


@contextmanager
def starting_children(*signums: int) -> Iterator[None]:
    """Processes started in the block begin with ``signums`` (default: SIGINT and SIGTERM) blocked; a signal
    to this process meanwhile is acted on when the block ends (see :func:`deferred`)."""
    start_resource_tracker()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, signums or SIGNALS)
    try:
        with deferred():
            yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextmanager
def longer_grace(seconds: float) -> Iterator[None]:
    """Give this process at least ``seconds`` from a signal to its end while the block runs (a launcher
    stopping its ranks)."""
    stop = current()
    if stop is None:
        yield
        return
    before, stop.grace = stop.grace, max(stop.grace, seconds)
    try:
        yield
    finally:
        if stop.signum is None:  # once a signal came, the process has that long to end
            stop.grace = before


def _restore_terminal(stop: Stop) -> None:
    with stop.quiet_lock:
        if stop.terminal is None:
            return
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(stop.terminal, 2)
        os.close(stop.terminal)
        stop.terminal = None


def _write_terminal(stop: Stop, line: str) -> None:
    """``line`` on the terminal's standard error (the saved one once silenced)."""
    try:
        if threading.current_thread() is threading.main_thread():  # the watcher never waits on the streams
            sys.stdout.flush()
        if stop.terminal is None:
            print(line, file=sys.stderr, flush=True)
        else:
            os.write(stop.terminal, (line + "\n").encode())
    except (OSError, ValueError):
        pass


def _safe(describe: Callable[[], str] | None) -> str:
    """The line ``describe`` gives, or a plain one if there is none or it fails (the files it reads may be
    half there)."""
    if describe is not None:
        try:
            return describe()
        except Exception as exc:  # the line must still be said
            log.debug("describing the interruption failed: %s", exc)
    return "interrupted"

"""Process context of a distributed run: rank, world size, process group and a side-channel store.

Ranks join from ``torchrun``'s environment (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``),
the same variables set by another launcher (a Kubernetes PyTorchJob), Slurm's under ``srun``
(:mod:`.environment`), or from :func:`graphshard.distributed.ranks.launcher.launch`. A failing rank records its
error in the store, so the others can raise an error that names it instead of a bare timeout; the
heartbeat (:mod:`.liveness`) finds a rank that stops answering within seconds and names it and its host.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import re
import time
import traceback
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from ...errors import DistError, GraphshardError
from ..host.environment import adopt_launcher_env
from ..host.processes import is_quiet
from ..transport.liveness import RECORDERS, Heartbeat, lost_after_default
from ..transport.network import LOOPBACK, gloo_options, own_address
from . import interrupt, startup

log = logging.getLogger(__name__)

ERROR_KEY = "error/"
PEER_FAILURE = "caused by a peer:"  # marks errors that only report another rank's failure
STOPPED = "told to stop"  # marks a rank's report of its own interruption (SIGINT, SIGTERM): never a root cause
LIVENESS_KEY = "liveness/"  # each rank's heartbeat address
PROCESS_KEY = "process/"  # each rank's address and process ID (its peers on the same host watch it go quiet)
# what gloo and sockets say when the other end went away (the text names no rank)
_TRANSPORT_LOSS = re.compile(
    r"Connection closed by peer|Connection reset|Broken pipe|pipe closed|\beof\b|"
    r"Connection refused|ECONNRESET",
    re.I,
)


@dataclass
class DistContext:
    """Everything a rank needs to talk to the others.

    Use as a context manager to tear down: leaving it records an error for the other ranks, stops the
    heartbeat and destroys the process group. Made by `from_env`.

    Attributes:
        rank: this process's rank.
        world_size: the number of ranks of the run.
        store: the run's key-value store (a ``torch.distributed`` store), for the side channel.
        timeout: seconds a collective or a store read may wait.
        address: this host's address on the run's network.
        heartbeat: the heartbeat that finds a peer that stops answering; None when off.
        reporter: a store client of its own for failure reports (a report must not wait behind another
            thread's request on the same client); None: reports go through ``store``.
    """

    rank: int
    world_size: int
    store: Any
    timeout: float
    _: KW_ONLY
    address: str = LOOPBACK  # this host's address on the run's network
    heartbeat: Heartbeat | None = None
    # a store client of its own for failure reports: a thread's request waits while another thread's waits
    # on the same client (a barrier's, on the peer that is lost), and the report must not wait behind it
    reporter: Any = None
    _unhook: list[Callable[[], None]] = field(default_factory=list)

    @classmethod
    def from_env(cls, timeout: float = 300.0, heartbeat_timeout: float | None = None) -> DistContext:
        """Join the process group described by torchrun-style environment variables.

        Slurm's variables under ``srun`` are read too (see `graphshard.distributed.host.environment`).

        Args:
            timeout: seconds a collective or a store read may wait.
            heartbeat_timeout: seconds of silence after which a peer is lost (see
                `graphshard.distributed.transport.liveness`; None: ``GRAPHSHARD_HEARTBEAT_TIMEOUT`` or the
                default; 0: off).

        Returns:
            This rank's context, joined to the gloo process group.

        Raises:
            DistError: ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` or ``MASTER_PORT`` is not set.
        """
        import torch.distributed as dist

        adopt_launcher_env()
        try:
            rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
            host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        except KeyError as exc:
            raise DistError(
                f"environment variable {exc.args[0]} is not set (launch with torchrun, srun, "
                "graphshard's --num-procs, or set MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE)"
            ) from None
        if not 0 <= rank < world:
            raise DistError(f"RANK={rank} is not in [0, WORLD_SIZE={world}): each rank's RANK is below WORLD_SIZE")
        delta = datetime.timedelta(seconds=timeout)
        address = own_address(host)
        lost_after = lost_after_default() if heartbeat_timeout is None else heartbeat_timeout
        beat = Heartbeat(rank, world, address, lost_after) if lost_after > 0 and world > 1 else None
        hosting = startup.hosts_store(rank)
        store = dist.PrefixStore("graphshard/", _store(host, port, world, hosting=hosting, timeout=timeout))
        startup.begin()  # from here on, a failure of this rank is told to its peers below
        start = startup.scope(store)
        try:
            startup.arrive(start, rank, world, name=startup.who(rank, address), timeout=timeout, where=f"{host}:{port}")
            _publish(store, rank, address, beat)
            # gloo listens on this host's address on the run's network (MASTER_ADDR on the host that holds it),
            # unless the user named an interface
            pg_options = None if os.environ.get("GLOO_SOCKET_IFNAME") else gloo_options(address)
            dist.init_process_group(
                "gloo",
                store=dist.PrefixStore("pg/", store),
                rank=rank,
                world_size=world,
                timeout=delta,
                pg_options=pg_options,
            )
        except BaseException as exc:
            if not isinstance(exc, startup.PeerStartupError):
                with contextlib.suppress(Exception):
                    startup.record(start, f"{startup.who(rank, address)} failed at start-up: {error_text(exc)}")
                if hosting:  # until the peers that arrived have read why
                    startup.linger(start, startup.peers_arrived(start, rank), min(timeout, startup.LINGER_S))
            if beat is not None:
                beat.leave(None)
            raise
        reporter = dist.PrefixStore("graphshard/", dist.TCPStore(host, port, world, is_master=False, timeout=delta))
        ctx = cls(rank, world, store, timeout, address=address, reporter=reporter)
        # every rank published before joining the group, so these reads do not wait
        processes = {r: store.get(f"{PROCESS_KEY}{r}").decode().split() for r in range(world) if r != rank}
        if beat is not None:
            beat.start({r: store.get(f"{LIVENESS_KEY}{r}").decode() for r in range(world)})
            ctx.heartbeat = beat
            RECORDERS.append(ctx._record_lost)
            ctx._unhook.append(interrupt.when_signalled(beat.announce_quiet))
        # told to stop, a rank closes nothing before its peers are quiet (see .interrupt)
        local = {r: int(pid) for r, (where, pid) in processes.items() if where == address}
        ctx._unhook.append(interrupt.before_unwinding(lambda: ctx._await_quiet(set(processes), local)))
        log.info("rank %d of %d joined (%s:%d) from %s", rank, world, host, port, address)
        return ctx

    def __enter__(self) -> DistContext:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        import torch.distributed as dist

        cause = exc
        stopped = interrupt.signal_of(exc) if exc is not None else None
        if stopped is not None:  # told to stop: whatever failed meanwhile failed because the peers stop too
            exc = exc if isinstance(exc, interrupt.Interrupted) else interrupt.Interrupted(stopped)
            self._record(f"rank {self.rank}: {_stopped_text(stopped)}")
        elif exc is not None:
            if self.heartbeat is not None and _peer_trouble(exc):
                line = self.heartbeat.await_finding(self.heartbeat.lost_after + 1.0)  # which peer, on which host
                exc = DistError(line) if line is not None else exc
            if exc is not cause:
                self._record_lost(str(exc))  # marked as a peer's failure, for the launcher
            else:
                self.report_failure(exc)
        for unhook in self._unhook:
            unhook()
        self._unhook = []
        if self.heartbeat is not None:  # after the report: a peer told of the failure finds it in the store
            said = _stopped_text(stopped) if stopped is not None else error_text(exc) if exc is not None else None
            self.heartbeat.leave(said)
            RECORDERS.remove(self._record_lost)
            self.heartbeat = None
        if dist.is_initialized():
            dist.destroy_process_group()
        if exc is not cause:  # the heartbeat named the peer at fault (or this rank was told to stop)
            raise exc from cause

    def _await_quiet(self, peers: set[int], local: dict[int, int]) -> None:
        """Wait (at most :data:`~.interrupt.QUIET_WAIT` s) until every peer is quiet: its heartbeat said so,
        or, on this host (``local``: rank -> process ID), its standard error is silenced."""
        beat = self.heartbeat

        def quiet(r: int) -> bool:
            heard = beat is not None and (beat.peers[r].quiet or beat.peers[r].gone)
            return heard or (r in local and is_quiet(local[r]))

        deadline = time.monotonic() + interrupt.QUIET_WAIT
        while not all(quiet(r) for r in peers) and time.monotonic() < deadline:
            time.sleep(0.005)  # polling the peers' state, against a deadline

    def report_failure(self, exc: BaseException) -> None:
        """Record this rank's error where the other ranks will find it.

        Args:
            exc: the error; its type, message and where it was raised are recorded.
        """
        self._record(error_text(exc))

    def _record(self, text: str) -> None:
        try:
            (self.reporter or self.store).set(f"{ERROR_KEY}{self.rank}", text)
        except Exception:  # the store may be gone, or was on a lost host; the launcher still reports the exit code
            pass

    def _record_lost(self, line: str) -> None:
        """Record a lost or failed peer (found by the heartbeat) as this rank's error, for the launcher."""
        self._record(f"rank {self.rank}: {PEER_FAILURE} {line}")

    def failed_peer(self) -> str | None:
        """The first recorded peer failure, as ``"rank R: message"``, or None."""
        for r in range(self.world_size):
            key = f"{ERROR_KEY}{r}"
            try:
                if r != self.rank and self.store.check([key]):
                    return f"rank {r}: {self.store.get(key).decode(errors='replace')}"
            except Exception:
                return None
        return None


def _store(host: str, port: int, world: int, *, hosting: bool, timeout: float) -> Any:
    """The run's store (see :func:`.startup.open_store`), a taken port named as rank 0's trouble."""
    try:
        return startup.open_store(host, port, world, hosting=hosting, timeout=timeout)
    except OSError as exc:
        raise DistError(
            f"rank 0 cannot host the run's store on {host}:{port}: {exc.strerror} (is another process, "
            "or another rank 0, using MASTER_PORT?)"
        ) from None


def _publish(store: Any, rank: int, address: str, beat: Heartbeat | None) -> None:
    """Publish this rank's heartbeat address and process, which its peers read once the group is formed."""
    if beat is not None:
        store.set(f"{LIVENESS_KEY}{rank}", beat.open())
    store.set(f"{PROCESS_KEY}{rank}", f"{address} {os.getpid()}")


def _stopped_text(signum: int) -> str:
    import signal

    return f"{STOPPED} ({signal.Signals(signum).name})"


def error_text(exc: BaseException) -> str:
    """One line for an exception: its type and message, and where it was raised unless it is a user's error
    (`InputError`, `FormatError`: their message names the file, key or ID at fault; graphshard's own source
    line would only distract)."""
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    frames = traceback.extract_tb(exc.__traceback__)
    if frames and not isinstance(exc, GraphshardError):
        text += f" (at {frames[-1].filename}:{frames[-1].lineno})"
    return text


def _peer_trouble(exc: BaseException) -> bool:
    """Whether an error only reports a peer's failure (ours, or the transport's), so the heartbeat may know
    more: which peer, on which host, doing what."""
    text = str(exc)
    return PEER_FAILURE in text or _TRANSPORT_LOSS.search(text) is not None

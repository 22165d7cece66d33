"""The start of a run: every rank's arrival, and a failure before joining told to the others in seconds.

Before the process group forms, each rank records in the run's store who it is (rank, host, process ID) and
its ``WORLD_SIZE``, then waits for the others while watching one key, :data:`FAILED`. A rank whose start
fails (a missing file, a bad option, ``RANK`` out of range, a ``WORLD_SIZE`` unlike its peers') writes one
line there before it exits (:func:`tell`), so every peer stops within a fraction of a second naming that rank,
its host and its error, instead of waiting out the timeout in gloo's rendezvous. Rank 0 hosts the store under
a plain environment and ``srun``: failing, it keeps the store up until each peer has read the line (at most
:data:`LINGER_S`), and a peer that finds the store gone says so.
"""

from __future__ import annotations

import datetime
import errno
import logging
import os
import socket
import time
from typing import Any

from ...errors import DistError
from ..host.environment import adopt_launcher_env
from ..transport.network import host_store, own_address

log = logging.getLogger(__name__)
notice = logging.getLogger("graphshard.notice")

FAILED = "failed"  # the first start-up failure, one line naming its rank and host
TOLD = "told"  # how many peers have read it (rank 0, hosting the store, waits for them)
ARRIVED = "arrived"  # how many ranks have arrived
WORLD = "world"  # ``WORLD_SIZE|NAME`` of the first rank to arrive
LINGER_S = 30.0  # at most this long a failed rank 0 keeps the store up for its peers to read why
POLL_S = 0.02  # how often an arriving rank first looks at the store while it waits for the others ...
POLL_MAX_S = 0.25  # ... and at most, however long it waits (hundreds of ranks poll one store)

_joining = False  # whether this process has begun to join a run (its failures from then on are told there)


class PeerStartupError(DistError):
    """Another rank failed to start (or the store's host went away); this rank itself did nothing wrong."""


def begin() -> None:
    """Note that this process is joining a run: from here on :func:`from_env`'s own path tells its peers."""
    global _joining
    _joining = True


def scope(store: Any) -> Any:
    """The keys of this start (under torchrun, of this restart: its agent's store outlives a restart)."""
    import torch.distributed as dist

    return dist.PrefixStore(f"startup/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/", store)


def who(rank: int, address: str) -> str:
    """How a rank is named to its peers: ``rank R on host ADDRESS (HOSTNAME)``."""
    return f"rank {rank} on host {address} ({socket.gethostname()})"


def arrive(store: Any, rank: int, world: int, *, name: str, timeout: float, where: str) -> None:
    """Record this rank's arrival and wait (at most ``timeout`` s) for all ``world`` ranks to arrive.

    Args:
        store: the run's store, as :func:`scope` gives it.
        rank: this process's rank.
        world: this process's ``WORLD_SIZE``.
        name: this rank as :func:`who` names it.
        timeout: seconds to wait for the others.
        where: the store's address, ``HOST:PORT``, for the error when it goes away.

    Raises:
        PeerStartupError: a peer failed at start-up (its line), or the store's host went away.
        DistError: this rank's ``WORLD_SIZE`` or rank clashes with a peer's (told to them too), or some
            ranks did not arrive within ``timeout`` (named).
    """
    try:
        store.set(f"who/{rank}/{store.add(f'claims/{rank}', 1)}", name)
        if store.add(f"claims/{rank}", 0) > 1:
            _refuse(store, f"{name}: another process is rank {rank} too ({_claimant(store, rank)})")
        first, _, first_name = store.compare_set(WORLD, "", f"{world}|{name}").decode(errors="replace").partition("|")
        if first != str(world):
            _refuse(store, f"WORLD_SIZE differs: {first} on {first_name}, {world} on {name}")
        store.set(f"in/{rank}", "1")  # counted below (a failed rank 0 then waits for one peer fewer)
        store.add(ARRIVED, 1)
        deadline, pause = time.monotonic() + timeout, POLL_S
        while store.add(ARRIVED, 0) < world:
            _check_failed(store)
            if time.monotonic() > deadline:
                missing = [r for r in range(world) if not store.check([f"who/{r}/1"])]
                raise DistError(
                    f"{'rank' if len(missing) == 1 else 'ranks'} {_listed(missing)} of {world} did not reach the "
                    f"run's store at {where} within {timeout:.0f} s"
                )
            time.sleep(pause)  # polling the store against a deadline, less often the longer it waits
            pause = min(POLL_MAX_S, pause * 1.5)
        _check_failed(store)
    except (PeerStartupError, DistError):
        raise
    except RuntimeError as exc:  # the store's connection: its host (rank 0's, or torchrun's agent) went away
        raise PeerStartupError(f"the run's store at {where} went away ({first_line(exc)}): its host stopped") from None


def _claimant(store: Any, rank: int) -> str:
    return store.get(f"who/{rank}/1").decode(errors="replace")


def _listed(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:10])) + (f" and {len(ranks) - 10} more" if len(ranks) > 10 else "")


def _refuse(store: Any, line: str) -> None:
    record(store, line)
    raise DistError(line)


def _check_failed(store: Any) -> None:
    if store.check([FAILED]):
        line = store.get(FAILED).decode(errors="replace")
        store.add(TOLD, 1)
        raise PeerStartupError(line)


def record(store: Any, line: str) -> None:
    """Write a start-up failure where every peer looks (the first one written stays)."""
    store.compare_set(FAILED, "", line)


def linger(store: Any, peers: int, seconds: float = LINGER_S) -> None:
    """Keep a store this process hosts up until ``peers`` peers have read the failure (at most ``seconds``)."""
    deadline = time.monotonic() + seconds
    try:
        while store.add(TOLD, 0) < peers and time.monotonic() < deadline:
            time.sleep(POLL_S)  # polling the store against a deadline
    except RuntimeError:
        pass


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (torch's store errors carry a C++ stack trace after it)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def tell(error: str, *, timeout: float = LINGER_S) -> bool:
    """Tell the other ranks of this process's run that it failed before joining; returns whether it did.

    Does nothing unless a launcher's environment (torchrun's, a PyTorchJob's, ``srun``'s) says this process
    is a rank, and it has not begun to join (then the joining code tells them). Rank 0, hosting the store,
    hosts it now and keeps it up until the peers have read the line (at most ``timeout`` s); another rank
    connects (waiting at most ``timeout`` s for the store) and writes it.

    Args:
        error: this process's error, one line.
        timeout: the longest wait for the store or the peers, seconds.

    Returns:
        Whether the line was written.
    """
    if _joining:
        return False
    try:
        if adopt_launcher_env() == "none":
            return False
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    except (KeyError, ValueError, DistError):
        return False  # not enough to find the store by
    if world < 2:
        return False
    line = f"{who(rank, own_address(host))} failed at start-up: {' '.join(error.split())}"
    hosts = hosts_store(rank)
    try:
        try:
            store = _store(host, port, world, hosts=hosts, timeout=timeout)
        except OSError as exc:  # the port is taken: by the store a second rank 0 hosts, say; tell it there
            if not hosts or exc.errno != errno.EADDRINUSE:
                raise
            store, hosts = _store(host, port, world, hosts=False, timeout=timeout), False
        record(store, line)
    except (RuntimeError, OSError, DistError) as exc:
        log.debug("could not tell the other ranks: %s", first_line(exc))
        return False
    if hosts:
        notice.info("keeping the run's store up (at most %.0f s) until the other ranks have read this", timeout)
        linger(store, world - 1, timeout)
    return True


def hosts_store(rank: int) -> bool:
    """Whether this rank hosts the run's store: rank 0, unless torchrun's agent or graphshard's launcher does."""
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    return rank == 0 and not agent and os.environ.get("GRAPHSHARD_STORE_HOSTED") != "1"


def open_store(host: str, port: int, world: int, *, hosting: bool, timeout: float) -> Any:
    """The run's store (unprefixed): hosted here on ``host:port`` (listening on ``host`` only; an ``OSError``
    when the port is taken), or a client of it (see :func:`client_store`)."""
    return host_store(host, port, world, timeout) if hosting else client_store(host, port, world, timeout=timeout)


def _store(host: str, port: int, world: int, *, hosts: bool, timeout: float) -> Any:
    import torch.distributed as dist

    return scope(dist.PrefixStore("graphshard/", open_store(host, port, world, hosting=hosts, timeout=timeout)))


def client_store(host: str, port: int, world: int, *, timeout: float) -> Any:
    """A client of the run's store at ``host:port``.

    Raises:
        DistError: the store did not answer within ``timeout`` s (one line, no C++ stack trace).
    """
    import torch.distributed as dist

    try:
        return dist.TCPStore(host, port, world, is_master=False, timeout=datetime.timedelta(seconds=timeout))
    except RuntimeError as exc:
        raise DistError(
            f"the run's store at {host}:{port} did not answer within {timeout:.0f} s ({first_line(exc)}): is "
            "rank 0 running, with the same MASTER_ADDR and MASTER_PORT as this rank?"
        ) from None


def peers_arrived(store: Any, rank: int) -> int:
    """How many ranks other than ``rank`` have arrived (0 when the store cannot say)."""
    try:
        return int(store.add(ARRIVED, 0)) - int(store.check([f"in/{rank}"]))
    except RuntimeError:
        return 0

"""A lost host found in seconds, whatever ``--timeout`` says (that stays the bound of long collectives).

Every rank sends a small UDP datagram (a heartbeat) to every other rank twice a second, from a socket
bound to its own address on the run's network (:func:`~.network.own_address`), and reads theirs. A peer
from which nothing came for ``lost_after`` seconds (:data:`DEFAULT_LOST_AFTER` unless
``--heartbeat-timeout`` or ``GRAPHSHARD_HEARTBEAT_TIMEOUT`` says otherwise) is lost: its link is down, its
process frozen or killed, its machine gone. A rank that leaves says so (a last datagram: done, or failed
with its error), so a peer that finished is never taken for a lost one; a rank told of a peer's failure
that has not stopped on its own ``lost_after`` seconds later (it may be waiting for the failed one) is
stopped, naming that failure. Each heartbeat carries what its rank is doing (:func:`doing`), so the survivor can say it.

A survivor cannot unwind a main thread blocked inside gloo or RPC, so it stops the process: it records the
error for the launcher (in the rendezvous store, bounded), writes torchrun's error file
(``TORCHELASTIC_ERROR_FILE``: torchrun shows that line as the root cause), prints one line and exits with
:data:`LOST_EXIT`. Outputs are written atomically, so nothing is left that looks complete; a run with
``--checkpoint`` resumes from its last finished epoch.

The heartbeat is a Python thread: a kernel that holds the GIL for longer than ``lost_after`` would silence
it, so graphshard's compiled kernels release the GIL (:mod:`graphshard.jit`). A rank whose own thread was
held up (the process was stopped, or starved, anywhere in its loop) does not blame its peers for that
silence: it reads what they sent meanwhile and does not count the time it was away against them.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import os
import secrets
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass

from ...errors import InputError
from .handshake import job_key

DEFAULT_LOST_AFTER = 6.0  # seconds of silence after which a peer is lost
INTERVAL_FRACTION = 12  # heartbeats per lost_after (twice a second at the default)
LOST_EXIT = 1
# magic, kind, rank, the sender's nonce (published in the store), its packet count; then the text, then an
# HMAC-SHA256 (the first _MAC bytes) of both under the job's key (see .handshake): a datagram of anyone who does
# not hold the job's secret is dropped, and a heartbeat replayed (a count seen before) too
_HEADER = struct.Struct("!4sBxI8sQ")
_MAC = 16
_MAGIC = b"GSHB"
BEAT, DONE, FAILED, QUIET = 1, 2, 3, 4
_MAX_TEXT = 900  # bytes of "doing" / error text carried (a datagram stays far below any MTU trouble)

_DOING = ["starting"]


def doing(what: str) -> None:
    """Say what this process is doing now (carried by its heartbeats; named if it is lost)."""
    _DOING[0] = what


def now_doing() -> str:
    return _DOING[0]


def lost_after_default() -> float:
    """``GRAPHSHARD_HEARTBEAT_TIMEOUT`` (seconds; 0 turns the heartbeat off), else :data:`DEFAULT_LOST_AFTER`."""
    text = os.environ.get("GRAPHSHARD_HEARTBEAT_TIMEOUT")
    if not text:
        return DEFAULT_LOST_AFTER
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise InputError(f"GRAPHSHARD_HEARTBEAT_TIMEOUT={text!r}: expected seconds (a number >= 0; 0: off)")
    return value


@dataclass
class Peer:
    rank: int
    address: tuple[str, int]
    nonce: bytes
    last: float
    _: KW_ONLY
    doing: str = "starting"
    gone: bool = False  # said it left (done or failed): never lost
    quiet: bool = False  # said it was told to stop and silenced itself (see .interrupt)
    failed: str | None = None  # the line naming its failure, until this rank stops on its own or is stopped
    failed_at: float = 0.0
    lost: str | None = None  # the line naming why it is gone: failed, silent, or left (see Heartbeat.unavailable)
    count: int = 0  # the last heartbeat's packet count: one not above it is a replay


class Heartbeat:
    """Heartbeats between the ranks of one run. :meth:`open` binds the socket and returns what to publish;
    :meth:`start` takes every rank's published address and starts the thread; :meth:`leave` says goodbye.

    ``on_lost(line)`` is called (once, from the thread) with the one line that names a lost or failed peer;
    by default :func:`stop_process`."""

    def __init__(
        self,
        rank: int,
        world_size: int,
        address: str,
        lost_after: float,
        *,
        on_lost: Callable[[str], None] | None = None,
    ):
        self.rank, self.world_size, self.address, self.lost_after = rank, world_size, address, lost_after
        self.interval = lost_after / INTERVAL_FRACTION
        self.on_lost = on_lost or stop_process
        self.nonce, self.key, self._counts = secrets.token_bytes(8), job_key(), itertools.count(1)
        self.peers: dict[int, Peer] = {}
        self._sock: socket.socket | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._fired = False

    def open(self) -> str:
        """Bind the socket on this rank's address (a free port); returns ``"host port nonce"`` to publish."""
        family = socket.AF_INET6 if ":" in self.address else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_DGRAM)
        self._sock.bind((self.address, 0))
        self._sock.setblocking(False)
        return f"{self.address} {self._sock.getsockname()[1]} {self.nonce.hex()}"

    def start(self, published: dict[int, str]) -> None:
        """Start beating to and watching every other rank (``published``: rank -> what :meth:`open` returned)."""
        now = time.monotonic()
        for r, text in published.items():
            if r != self.rank:
                host, port, nonce = text.split()
                self.peers[r] = Peer(r, (host, int(port)), bytes.fromhex(nonce), now)
        self._thread = threading.Thread(target=self._run, name="graphshard-heartbeat", daemon=True)
        self._thread.start()

    def leave(self, error: str | None = None) -> None:
        """Stop watching and tell every peer this rank left: done, or failed with ``error``."""
        if self._sock is None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2 * self.interval + 1)
        kind, text = (DONE, "") if error is None else (FAILED, error)
        for _ in range(3):  # datagrams may be dropped; three make a lost goodbye unlikely on a LAN
            self._send_all(kind, text)
        self._sock.close()
        self._sock = None

    def await_finding(self, within: float) -> str | None:
        """For a main thread that failed because of a peer (a closed connection names no rank or host): wait up
        to ``within`` seconds for the heartbeat to say which peer failed, and return that line. A peer found
        silent meanwhile stops this process from the heartbeat thread, with its own line."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline and self._thread is not None and self._thread.is_alive():
            failed = [p.failed for p in self.peers.values() if p.failed]
            if failed:
                return failed[0]
            time.sleep(0.05)  # polling what the heartbeat thread found, against a deadline
        return None

    def announce_quiet(self) -> None:
        """Tell every peer this rank was told to stop and has silenced itself (see :mod:`.interrupt`): it may
        close its connections to us without our transports logging it. Safe from any thread."""
        if self._sock is not None:
            for _ in range(3):  # datagrams may be dropped; three make a lost one unlikely on a LAN
                self._send_all(QUIET, "")

    def unavailable(self) -> dict[int, str]:
        """The peers that can no longer be asked anything, each with one line naming it, its host and why: it
        failed, went silent for ``lost_after`` seconds, or left (a long-running service, where a peer that
        leaves is as gone as a lost one). Safe from any thread."""
        now, out = time.monotonic(), {}
        for p in list(self.peers.values()):
            silent = now - p.last
            if p.lost is not None:
                out[p.rank] = p.lost
            elif not p.gone and silent > self.lost_after:
                out[p.rank] = f"rank {p.rank} on host {p.address[0]}: no heartbeat for {silent:.1f} s"
        return out

    def host_of(self, rank: int) -> str:
        return self.address if rank == self.rank else self.peers[rank].address[0]

    def _send_all(self, kind: int, text: str) -> None:
        sock = self._sock
        if sock is None:  # closed by leave(): nothing to send from
            return
        body = _HEADER.pack(_MAGIC, kind, self.rank, self.nonce, next(self._counts)) + text.encode()[:_MAX_TEXT]
        packet = body + self._sign(body)
        for p in self.peers.values():
            if not p.gone:
                try:
                    sock.sendto(packet, p.address)
                except OSError:  # link down, no route: the peer will miss us, and we it
                    pass

    def _run(self) -> None:
        sock = self._sock
        assert sock is not None, "start() follows open()"
        next_beat = checked = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_beat:
                self._send_all(BEAT, now_doing())
                next_beat = now + self.interval
            wait = max(0.0, min(0.1, next_beat - now))
            try:
                select.select([sock], [], [], wait)
            except (OSError, ValueError):  # closed under us by leave()
                return
            self._read(sock)
            previous, checked = checked, time.monotonic()
            self._credit(checked, held=checked - previous - wait)
            self._check(checked)

    def _credit(self, now: float, *, held: float) -> None:
        """This thread came back ``held`` seconds later than its own wait asked (the process was stopped, or
        starved, in the wait, in a read or between loops): that silence may be ours, so it is not counted
        against the peers (whose beats meanwhile, if any, were read just before)."""
        if held > self.lost_after / 10:
            for p in self.peers.values():
                p.last = min(p.last + held, now)

    def _read(self, sock: socket.socket) -> None:
        while True:
            try:
                data, _ = sock.recvfrom(_HEADER.size + _MAX_TEXT + _MAC)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            if len(data) < _HEADER.size + _MAC:
                continue
            body = data[:-_MAC]
            magic, kind, rank, nonce, count = _HEADER.unpack_from(body)
            peer = self.peers.get(rank)
            if magic != _MAGIC or peer is None or nonce != peer.nonce:  # not of this run
                continue
            if not hmac.compare_digest(data[-_MAC:], self._sign(body)):  # not of the job's secret
                continue
            if kind == BEAT:
                if count <= peer.count:  # a replay (or late): it says nothing of now
                    continue
                peer.count = count
            text = body[_HEADER.size :].decode(errors="replace")
            peer.last = time.monotonic()
            if kind == BEAT:
                peer.doing = text
            elif kind == DONE:
                peer.gone = True
                peer.lost = peer.lost or f"rank {rank} on host {peer.address[0]} left (it was {peer.doing})"
            elif kind == QUIET:
                peer.quiet = True
            elif kind == FAILED and not peer.gone:
                peer.gone, peer.failed_at = True, peer.last
                peer.failed = (
                    f"rank {rank} on host {peer.address[0]} failed while {peer.doing}: {text}; noticed by "
                    f"rank {self.rank} on {self.address} while {now_doing()}"
                )
                peer.lost = peer.failed

    def _sign(self, body: bytes) -> bytes:
        return hmac.new(self.key, body, hashlib.sha256).digest()[:_MAC]

    def _check(self, now: float) -> None:
        for p in self.peers.values():
            if p.failed and now - p.failed_at > self.lost_after and not self._stop.is_set():
                self._fire(p.failed)  # this rank did not stop on its own (it may wait on the failed one)
            silent = now - p.last
            if not p.gone and silent > self.lost_after and not self._stop.is_set():
                p.lost = (
                    f"lost rank {p.rank} on host {p.address[0]}: no heartbeat for {silent:.1f} s (link down, "
                    f"process frozen or killed) while it was {p.doing}; noticed by rank {self.rank} on "
                    f"{self.address} while {now_doing()}"
                )
                self._fire(p.lost)
                p.gone = True

    def _fire(self, line: str) -> None:
        if not self._fired:
            self._fired = True
            self.on_lost(line)


# Called by stop_process before it exits (set by the process context: records the error in the store).
RECORDERS: list[Callable[[str], None]] = []


def stop_process(line: str, quiet: bool | None = None) -> None:
    """Stop this process because a peer is lost or failed: record ``line`` where the launcher reads it
    (each recorder bounded to a second), write torchrun's error file, print it (unless a graphshard
    launcher on this machine prints the run's outcome), exit with :data:`LOST_EXIT`."""
    for record in list(RECORDERS):
        t = threading.Thread(target=record, args=(line,), daemon=True)
        t.start()
        t.join(1.0)  # the store may live on the lost host
    write_error_file(line)
    if quiet is None:
        quiet = os.environ.get("GRAPHSHARD_STORE_HOSTED") == "1"
    if not quiet:
        sys.stdout.flush()
        print(f"graphshard: error: {line}", file=sys.stderr, flush=True)
    os._exit(LOST_EXIT)


def write_error_file(message: str) -> None:
    """Write ``message`` to torchrun's per-rank error file (``TORCHELASTIC_ERROR_FILE``), in the form its
    agent reads, so torchrun reports it as the failure's cause; nothing outside torchrun."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    data = {"message": {"message": message, "extraInfo": {"py_callstack": message, "timestamp": str(int(time.time()))}}}
    try:
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except OSError:  # torchrun then reports the exit code alone
        pass

"""TCP channels between the members of a group: every request one process makes of another (neighbour sampling,
feature rows, degrees, ``DistTensor`` and ``DistEmbedding`` reads and writes, gradient sums, look-ups, control).

A request names a handler registered here (:func:`handler`) and carries its arguments as a short JSON
header followed by the raw bytes of its tensors (:mod:`.frames`); the answer travels the same way. Nothing
is pickled. Measured on this project's 2-core machine, a torch RPC (TensorPipe, which this replaced) cost
about 0.4 ms of CPU on each side before any work, and 2.6 ms in all to send 14,000 rows of 32 floats (0.25 ms
of which is the gather); here a request is a ``sendmsg`` on one side and a ``recv_into`` preallocated tensors
on the other.

Each member listens on its address of the run's network (loopback by default), publishes ``ip:port`` in the group's
store, and connects to a peer on first use. Every connection opens with a handshake in which both ends prove they
hold the job's secret (:mod:`.handshake`); the listener reads no request before, closes a connection that fails it
and names its host in the log once, and lets only so many connections prove themselves at once
(:data:`MAX_HANDSHAKING`, per host and in all). A connection carries one request at a time, so concurrent callers (a
prefetch thread, a service's workers) each take their own; a thread on the serving side answers each connection in
turn. Every wait is bounded (the group's timeout), a wait on a member the caller tracks ends when it is lost
(``check``), and a closed connection raises :class:`ChannelLost`. The serving side waits for a caller's next request
however long (the caller's wait is bounded), but not for the rest of one begun, nor for a caller to read its answer.
Handler errors come back as :class:`RemoteFailure` with the first line of the error.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from ..host.counts import Counts
from ..host.settings import request_priority
from ..host.threads import budget_this_thread
from . import handshake
from .frames import ChannelLost, FrameReader, decode, encode, pack
from .network import listen_socket
from .tls import Tls

log = logging.getLogger(__name__)

_HANDLERS: dict[str, Callable[..., Any]] = {}
_POLL = 0.1  # seconds between looks at a tracked peer's state while waiting for its answer
_IOV = 512  # buffers per sendmsg (Linux allows 1024)
# Answers (feature rows, in bulk) leave with the kernel's own send buffer, which grows to hold a batch's rows
# (3.9 MB at 128-d): they reach the kernel in a call or two, and the answering thread need not run again while
# they drain to a slow link. Requests pass them by priority (below). A 256 KiB buffer used to keep small
# messages from waiting long behind rows; with the requests ahead, on 2 emulated hosts at 1 Gbit/s, 128-d, the
# kernel's own gave 11.94-14.47 s an epoch (median 12.52) against 12.83-16.05 s (14.41), 5 alternated pairs.


class ChannelRefused(ChannelLost):
    """The listener did not prove the job's secret (or is no graphshard channel)."""


# connections a listener lets prove themselves at once, from one host and in all; more are closed unread (a flood
# from one stranger host then takes no slot from the run's own hosts)
MAX_HANDSHAKING = (16, 256)
MAX_NAMED = 64  # hosts named in the log as refused (a stranger of many addresses is not given a line each)


class RemoteFailure(RuntimeError):
    """The peer's handler raised; the message is the first line of its error (``Type: message``)."""


def handler(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Register ``fn`` as a request any member may send through a channel (by its module and name)."""
    name = f"{fn.__module__}.{fn.__qualname__}"
    _HANDLERS[name] = fn
    fn.channel_name = name  # type: ignore[attr-defined]
    return fn


def handler_name(fn: Callable[..., Any]) -> str | None:
    """The name ``fn`` is registered under, or None if it is not a channel handler."""
    return getattr(fn, "channel_name", None)


# ----------------------------------------------------------------------------------------------- sockets


def _send(sock: socket.socket, bufs: list[memoryview]) -> None:
    if isinstance(sock, ssl.SSLSocket):  # TLS has no scatter-gather send: a record or more a buffer
        for b in bufs:
            sock.sendall(b)
        return
    while bufs:
        sent = sock.sendmsg(bufs[:_IOV])
        while sent:
            if sent >= len(bufs[0]):
                sent -= len(bufs[0])
                bufs.pop(0)
            else:
                bufs[0] = bufs[0][sent:]
                sent = 0


# ----------------------------------------------------------------------------------------------- the serving side


class _Server:
    """Accepts connections on ``listener``; a thread per connection answers its requests in turn."""

    def __init__(self, listener: socket.socket, who: str, timeout: float, key: bytes, *, tls: Tls | None):
        self.listener, self.who, self.timeout, self.key, self.tls = listener, who, timeout, key, tls
        self.handshaking: dict[str, int] = {}  # connections proving themselves, by host
        self.refused: set[str] = set()  # hosts named in the log
        self.stopped = threading.Event()
        self.conns: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, name="graphshard-channel-accept", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError as exc:
                if self.closed:
                    return
                log.debug("%s: accepting a channel connection failed: %s", self.who, exc)
                self.stopped.wait(0.05)  # e.g. out of file descriptors: try again shortly
                continue
            with self.lock:
                if self.closed:
                    conn.close()
                    return
                host = _host_of(conn)
                crowded = (
                    self.handshaking.get(host, 0) >= MAX_HANDSHAKING[0]
                    or sum(self.handshaking.values()) >= MAX_HANDSHAKING[1]
                )
                if not crowded:
                    self.handshaking[host] = self.handshaking.get(host, 0) + 1
                    self.conns.add(conn)
            if crowded:  # a flood: closed unread, so that those proving themselves keep their threads
                _close(conn)
                continue
            try:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                threading.Thread(target=self._answer, args=(conn, host), name="graphshard-channel", daemon=True).start()
            except (OSError, RuntimeError) as exc:  # closed already, or no thread to be had: this one only
                log.debug("%s: a channel connection from %s could not be served: %s", self.who, host, exc)
                with self.lock:
                    self.conns.discard(conn)
                    self._proving_done(host)
                _close(conn)

    def _refuse(self, conn: socket.socket, host: str, why: str) -> None:
        """Close a connection from ``host`` that did not prove the job's secret; the host is named in the log
        once."""
        with self.lock:
            first = host not in self.refused and len(self.refused) < MAX_NAMED
            if first:
                self.refused.add(host)
        if first and not self.closed:  # said before the connection closes: the caller sees the close after it
            log.warning("%s: refused a channel connection from %s: %s", self.who, host, why)
        _close(conn)

    def _proven(self, conn: socket.socket, host: str) -> socket.socket | None:
        """The connection (in TLS, when the run has it) once the caller proved the job's secret; None when it was
        refused."""
        within = min(self.timeout, handshake.HANDSHAKE_WITHIN)
        try:
            if self.tls is not None:
                conn.settimeout(within)
                wrapped = self.tls.server.wrap_socket(conn, server_side=True)
                with self.lock:
                    self.conns.discard(conn)
                    self.conns.add(wrapped)
                conn = wrapped
            handshake.answer(conn, self.key, within=within)
        except (handshake.HandshakeFailed, OSError) as exc:  # ssl.SSLError too
            with self.lock:
                self.conns.discard(conn)
            self._refuse(conn, host, str(exc))
            return None
        finally:
            with self.lock:
                self._proving_done(host)
        return conn

    def _proving_done(self, host: str) -> None:
        """One connection from ``host`` has ended its handshake (hold the lock)."""
        left = self.handshaking.pop(host) - 1
        if left:
            self.handshaking[host] = left

    def _answer(self, accepted: socket.socket, host: str) -> None:
        conn = self._proven(accepted, host)
        if conn is None:
            return
        reader = FrameReader(conn)
        try:
            budget_this_thread()  # handlers run numba kernels: this thread takes the rank's share of the cores
            while True:
                # the next request, however long in coming (the caller's wait is its own), then read whole in time;
                # a caller that stops reading the answer frees this thread in time too
                header, arrays = reader.frame(within=self.timeout)
                _send(conn, _answer_frame(header, arrays))
        except Exception as exc:  # the caller went away, or sent what is not a frame
            if not self.closed and not isinstance(exc, ChannelLost):
                log.debug("%s: channel connection dropped: %s", self.who, exc)
        finally:
            with self.lock:
                self.conns.discard(conn)
            conn.close()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            conns = list(self.conns)
        self.stopped.set()
        _close(self.listener)
        for c in conns:
            _close(c)


def _answer_frame(header: dict, arrays: list[torch.Tensor]) -> list[memoryview]:
    """The frame answering a request: the handler's value, or an error line (also when the value cannot
    be framed)."""
    try:
        return pack(*_call(header, arrays))
    except Exception as exc:
        return pack({"e": f"{type(exc).__name__}: {exc}".splitlines()[0]}, [])


def _call(header: dict, arrays: list[torch.Tensor]) -> tuple[dict, list[torch.Tensor]]:
    """Run the request's handler; its answer, or its error as ``{"e": line}``."""
    out: list[torch.Tensor] = []
    try:
        fn = _HANDLERS.get(header.get("h", ""))
        if fn is None:
            raise LookupError(f"no channel handler named {header.get('h')!r}")
        value = encode(fn(*decode(header["v"], arrays)), out)
    except Exception as exc:  # the caller raises it, naming this member
        return {"e": f"{type(exc).__name__}: {exc}".splitlines()[0]}, []
    return {"v": value}, out


def _host_of(conn: socket.socket) -> str:
    try:
        return str(conn.getpeername()[0])
    except OSError:
        return "an unknown address"


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


# ----------------------------------------------------------------------------------------------- the calling side


class Pending:
    """A request in flight on one connection; :meth:`result` waits for its answer."""

    def __init__(self, channels: Channels, member: int, sock: socket.socket, deadline: float):
        self.channels, self.member, self.deadline = channels, member, deadline
        self.sock: socket.socket | None = sock

    def cancel(self) -> None:
        """Drop the request unread (its connection is closed; the peer's answer goes nowhere)."""
        if self.sock is not None:
            _close(self.sock)
            self.sock = None

    def result(self, check: Callable[[], None] | None = None) -> Any:
        """The handler's value. Raises :class:`RemoteFailure`, or :class:`ChannelLost` (the connection is
        dropped); ``check`` is called while waiting, and may raise to end the wait."""
        sock, self.sock = self.sock, None
        if sock is None:
            raise ChannelLost("the request was already answered or cancelled")
        try:
            sock.settimeout(_POLL)  # each quiet poll looks at the deadline, the peer's state and the low-water mark
            header, arrays = FrameReader(sock, self.deadline, check, bulk=True).frame()
        except BaseException:
            _close(sock)
            raise
        self.channels._idle(self.member, sock)
        if "e" in header:
            raise RemoteFailure(header["e"])
        return decode(header["v"], arrays)


class Channels:
    """This member's end of the group's channels: a listener, and connections to peers made on first use.
    ``address_of(member)`` gives a peer's ``(ip, port)`` (from the group's store)."""

    def __init__(
        self,
        host: str,
        who: str,
        timeout: float,
        address_of: Callable[[int], tuple[str, int]],
        *,
        key: bytes = b"",
        tls: Tls | None = None,
    ):
        self.who, self.timeout, self.address_of, self.key, self.tls = who, timeout, address_of, key, tls
        self.priority = request_priority()
        listener = listen_socket(host, 0)
        self.address: tuple[str, int] = listener.getsockname()[:2]
        self._server = _Server(listener, who, timeout, key, tls=tls)
        self._idle_socks: dict[int, list[socket.socket]] = {}
        self._addresses: dict[int, tuple[str, int]] = {}
        self._lock = threading.Lock()
        self.stats = Counts("requests")  # sent by this member (answers are counted by the caller's own stats)

    def send(self, member: int, fn: Callable[..., Any], args: tuple) -> Pending:
        """Send ``fn(*args)`` (a :func:`handler`) to ``member``; the answer is read by :meth:`Pending.result`."""
        name = handler_name(fn)
        if name is None:
            raise TypeError(f"{fn.__qualname__} is not a channel handler")
        arrays: list[torch.Tensor] = []
        bufs = pack({"h": name, "v": encode(args, arrays)}, arrays)
        deadline = time.monotonic() + self.timeout
        sock = self._connection(member)
        try:
            sock.settimeout(self.timeout)
            _send(sock, bufs)
        except TimeoutError:
            _close(sock)
            raise ChannelLost("it did not take the request in time", timed_out=True) from None
        except OSError as exc:
            _close(sock)
            raise ChannelLost(f"sending failed ({exc})") from None
        self.stats.add(requests=1)
        return Pending(self, member, sock, deadline)

    def _connection(self, member: int) -> socket.socket:
        with self._lock:
            idle = self._idle_socks.get(member)
            if idle:
                return idle.pop()
            address = self._addresses.get(member)
        if address is None:
            address = self.address_of(member)
            with self._lock:
                self._addresses[member] = address
        try:
            sock = socket.create_connection(address, timeout=self.timeout)
        except OSError as exc:
            raise ChannelLost(
                f"cannot connect to {address[0]}:{address[1]} ({exc})", timed_out=isinstance(exc, TimeoutError)
            ) from None
        try:
            within = min(self.timeout, handshake.HANDSHAKE_WITHIN)
            if self.tls is not None:
                sock.settimeout(within)
                sock = self.tls.client.wrap_socket(sock)
            handshake.call(sock, self.key, within=within)
        except handshake.HandshakeCut as exc:  # not an answer: slow, or gone
            _close(sock)
            raise ChannelLost(f"{address[0]}:{address[1]}: {exc}", timed_out=exc.timed_out) from None
        except (handshake.HandshakeFailed, ssl.SSLError) as exc:
            _close(sock)
            raise ChannelRefused(f"{address[0]}:{address[1]}: {exc}") from None
        except OSError as exc:
            _close(sock)
            raise ChannelLost(f"{address[0]}:{address[1]}: the connection failed ({exc})") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.priority and hasattr(socket, "SO_PRIORITY"):  # Linux's
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, self.priority)
        return sock

    def refused_hosts(self) -> set[str]:
        """The hosts whose connections this member's listener refused."""
        with self._server.lock:
            return set(self._server.refused)

    def probe(self, member: int) -> None:
        """Connect to ``member`` now (the handshake proves both ends hold the job's secret) and keep the connection
        for its first request. Raises :class:`ChannelRefused`, or :class:`ChannelLost`."""
        self._idle(member, self._connection(member))

    def _idle(self, member: int, sock: socket.socket) -> None:
        with self._lock:
            if not self._server.closed:
                self._idle_socks.setdefault(member, []).append(sock)
                return
        _close(sock)  # answered after close(): not kept

    def close(self) -> None:
        """Stop answering and drop every connection."""
        self._server.close()
        with self._lock:
            socks = [s for idle in self._idle_socks.values() for s in idle]
            self._idle_socks.clear()
        for s in socks:
            _close(s)

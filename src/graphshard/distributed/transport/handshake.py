"""The job secret, and the handshake that opens every channel connection before any request is read.

Both ends prove they hold the job's secret, over fresh nonces from both sides (HMAC-SHA256, compared in constant
time), the caller first, so that a listener signs nothing for a stranger:

1. the caller sends :data:`MAGIC` and its nonce;
2. the listener answers with its nonce;
3. the caller sends ``HMAC(key, "caller" | caller's nonce | listener's nonce)``;
4. the listener checks it and answers ``HMAC(key, "listener" | both nonces)`` (or :data:`REFUSED`, and closes);
   only then does it read a request, and the caller checks the listener's proof before sending one.

A replayed message proves nothing (the other side's nonce is new each time). The whole exchange is bounded
(:data:`HANDSHAKE_WITHIN` seconds, however slowly the bytes come). The secret comes from ``GRAPHSHARD_SECRET`` or
the file named by ``GRAPHSHARD_SECRET_FILE`` (``--secret-file``), at least :data:`MIN_SECRET` characters; the
local launcher makes one per run. Without one (a run on loopback, started by hand or by torchrun), the key is
empty: the handshake still turns away what does not speak it, but any process of this machine that does may
connect.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import socket
import time
from pathlib import Path

from ...errors import InputError
from .network import is_loopback

SECRET_ENV = "GRAPHSHARD_SECRET"
SECRET_FILE_ENV = "GRAPHSHARD_SECRET_FILE"
INSECURE_ENV = "GRAPHSHARD_INSECURE"
MAGIC = b"GSCHAN1\n"
NONCE = 32
DIGEST = 32
HANDSHAKE_WITHIN = 10.0  # seconds a peer has to complete the handshake
MIN_SECRET = 16  # characters: a shorter secret could be guessed from a recorded proof
REFUSED = b"graphshard: refused, not the secret"[:32].ljust(32, b".")  # said to a caller whose proof failed


class HandshakeFailed(ConnectionError):
    """The peer did not prove the job's secret (or does not speak the handshake)."""


class HandshakeCut(HandshakeFailed):
    """The handshake did not end in time (``timed_out``), or the connection failed or closed during it."""

    def __init__(self, message: str, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


def job_key() -> bytes:
    """The key of this process's job: SHA-256 of the secret (``GRAPHSHARD_SECRET``, else the file named by
    ``GRAPHSHARD_SECRET_FILE``), or empty without one. Raises :class:`InputError` naming an unreadable or
    empty secret file."""
    secret = os.environ.get(SECRET_ENV, "")
    path = os.environ.get(SECRET_FILE_ENV, "")
    if not secret and path:
        try:
            secret = Path(path).read_text().strip()
        except OSError as exc:
            raise InputError(f"--secret-file {path}: cannot be read ({exc.strerror})") from None
        if not secret:
            raise InputError(f"--secret-file {path}: the file is empty")
    if secret and len(secret) < MIN_SECRET:
        where = f"--secret-file {path}" if path and not os.environ.get(SECRET_ENV) else SECRET_ENV
        raise InputError(
            f"{where}: the secret has {len(secret)} characters, fewer than {MIN_SECRET}: use a random one, e.g. "
            "`openssl rand -hex 32`"
        )
    return hashlib.sha256(secret.encode()).digest() if secret else b""


def insecure() -> bool:
    """Whether the run was told it may listen beyond loopback without a secret (``--insecure``)."""
    return os.environ.get(INSECURE_ENV, "") == "1"


def listening_key(address: str, who: str) -> bytes:
    """The job key of a process about to listen on ``address``. Raises :class:`InputError` when that is not
    loopback and there is no secret, unless the run was told ``--insecure``."""
    key = job_key()
    if not key and not is_loopback(address) and not insecure():
        raise InputError(
            f"{who} would listen on {address} without a job secret, so anyone on that network could send it "
            "requests: give every process the same secret (GRAPHSHARD_SECRET, or --secret-file FILE), or pass "
            "--insecure on a network you trust"
        )
    return key


def new_secret() -> str:
    """A fresh secret for one run (what the local launcher gives its ranks)."""
    return secrets.token_hex(32)


def _mac(key: bytes, role: bytes, first: bytes, second: bytes) -> bytes:
    return hmac.new(key, role + first + second, hashlib.sha256).digest()


def _exactly(sock: socket.socket, n: int, deadline: float) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise HandshakeCut("the handshake did not end in time", timed_out=True)
        try:
            sock.settimeout(left)  # one deadline for the whole exchange, however slowly the bytes come
            chunk = sock.recv(n - len(buf))
        except OSError as exc:  # a time-out too
            cut = f"the handshake was cut short ({exc or 'timed out'})"
            raise HandshakeCut(cut, timed_out=isinstance(exc, TimeoutError)) from None
        if not chunk:
            raise HandshakeCut("the connection closed during the handshake")
        buf += chunk
    return bytes(buf)


def _send(sock: socket.socket, data: bytes, deadline: float) -> None:
    try:
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        sock.sendall(data)
    except OSError as exc:
        cut = f"the handshake was cut short ({exc or 'timed out'})"
        raise HandshakeCut(cut, timed_out=isinstance(exc, TimeoutError)) from None


def call(sock: socket.socket, key: bytes, within: float = HANDSHAKE_WITHIN) -> None:
    """The caller's side on a new connection. Raises :class:`HandshakeFailed` (:class:`HandshakeCut` when it did
    not end)."""
    deadline = time.monotonic() + within
    mine = secrets.token_bytes(NONCE)
    _send(sock, MAGIC + mine, deadline)
    theirs = _exactly(sock, NONCE, deadline)
    _send(sock, _mac(key, b"caller", mine, theirs), deadline)
    proof = _exactly(sock, DIGEST, deadline)
    if hmac.compare_digest(proof, REFUSED):
        raise HandshakeFailed("the listener refused this process's proof: it holds another secret")
    if not hmac.compare_digest(proof, _mac(key, b"listener", mine, theirs)):
        raise HandshakeFailed("the listener did not prove the job secret (another job's, or no graphshard channel)")


def answer(sock: socket.socket, key: bytes, within: float = HANDSHAKE_WITHIN) -> None:
    """The listener's side on an accepted connection; nothing else is read from it before this returns. Raises
    :class:`HandshakeFailed` (:class:`HandshakeCut` when it did not end)."""
    deadline = time.monotonic() + within
    hello = _exactly(sock, len(MAGIC) + NONCE, deadline)
    if not hmac.compare_digest(hello[: len(MAGIC)], MAGIC):
        raise HandshakeFailed("it does not speak graphshard's channel handshake")
    theirs, mine = hello[len(MAGIC) :], secrets.token_bytes(NONCE)
    _send(sock, mine, deadline)
    if not hmac.compare_digest(_exactly(sock, DIGEST, deadline), _mac(key, b"caller", theirs, mine)):
        try:
            _send(sock, REFUSED, deadline)
        except HandshakeCut:
            pass
        raise HandshakeFailed("it did not prove the job secret")
    _send(sock, _mac(key, b"listener", theirs, mine), deadline)

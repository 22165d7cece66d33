"""The job secret, and the handshake that opens every channel connection before any request is read.

Both ends prove they hold the job's secret, over fresh nonces from both sides (HMAC-SHA256, compared in constant
time), in four short messages:

1. the caller sends :data:`MAGIC` and its nonce;
2. the listener answers with its nonce and ``HMAC(key, "listener" | caller's nonce | its nonce)``;
3. the caller checks that, and sends ``HMAC(key, "caller" | caller's nonce | listener's nonce)``;
4. the listener checks it; only then does it read a request.

A replayed message proves nothing (the other side's nonce is new each time), and neither side sends anything
derived from the secret before the other has sent its nonce. The secret comes from ``GRAPHSHARD_SECRET`` or
the file named by ``GRAPHSHARD_SECRET_FILE`` (``--secret-file``); the local launcher makes one per run. Without
one (a run on loopback, started by hand or by torchrun), the key is empty: the handshake still turns away what
does not speak it, but any process of this machine that does may connect.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import socket
from pathlib import Path

from ..errors import InputError
from .network import is_loopback

SECRET_ENV = "GRAPHSHARD_SECRET"
SECRET_FILE_ENV = "GRAPHSHARD_SECRET_FILE"
INSECURE_ENV = "GRAPHSHARD_INSECURE"
MAGIC = b"GSCHAN1\n"
NONCE = 32
DIGEST = 32
HANDSHAKE_WITHIN = 10.0  # seconds a peer has to complete the handshake


class HandshakeFailed(ConnectionError):
    """The peer did not prove the job's secret (or does not speak the handshake)."""


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


def _exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except OSError as exc:  # a time-out too
            raise HandshakeFailed(f"the handshake was cut short ({exc or 'timed out'})") from None
        if not chunk:
            raise HandshakeFailed("the connection closed during the handshake")
        buf += chunk
    return bytes(buf)


def _send(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError as exc:
        raise HandshakeFailed(f"the handshake was cut short ({exc or 'timed out'})") from None


def call(sock: socket.socket, key: bytes, within: float = HANDSHAKE_WITHIN) -> None:
    """The caller's side on a new connection. Raises :class:`HandshakeFailed`."""
    sock.settimeout(within)
    mine = secrets.token_bytes(NONCE)
    _send(sock, MAGIC + mine)
    answer = _exactly(sock, NONCE + DIGEST)
    theirs, proof = answer[:NONCE], answer[NONCE:]
    if not hmac.compare_digest(proof, _mac(key, b"listener", mine, theirs)):
        raise HandshakeFailed("the listener did not prove the job secret (another job's, or no graphshard channel)")
    _send(sock, _mac(key, b"caller", mine, theirs))


def answer(sock: socket.socket, key: bytes, within: float = HANDSHAKE_WITHIN) -> None:
    """The listener's side on an accepted connection; nothing else is read from it before this returns. Raises
    :class:`HandshakeFailed`."""
    sock.settimeout(within)
    hello = _exactly(sock, len(MAGIC) + NONCE)
    if not hmac.compare_digest(hello[: len(MAGIC)], MAGIC):
        raise HandshakeFailed("it does not speak graphshard's channel handshake")
    theirs, mine = hello[len(MAGIC) :], secrets.token_bytes(NONCE)
    _send(sock, mine + _mac(key, b"listener", theirs, mine))
    if not hmac.compare_digest(_exactly(sock, DIGEST), _mac(key, b"caller", theirs, mine)):
        raise HandshakeFailed("it did not prove the job secret")

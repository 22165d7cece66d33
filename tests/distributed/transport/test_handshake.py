"""Every channel connection opens with the job secret's handshake: peers of the job get answers; a stranger's
random bytes, a well-formed frame, a pickle, a replayed handshake or a flood of connections get nothing read,
nothing run, and are named in the log once; a listener of another secret is refused by the caller."""

from __future__ import annotations

import hashlib
import hmac
import pickle
import re
import socket
import time
from pathlib import Path

import pytest

import graphshard
from graphshard.distributed.transport import channel, handshake
from graphshard.distributed.transport.channel import ChannelRefused, Channels
from graphshard.distributed.transport.frames import encode, pack
from graphshard.errors import InputError

KEY = hashlib.sha256(b"the job's secret").digest()
CREATED: list[str] = []


@channel.handler
def _create(path: str) -> str:
    CREATED.append(path)
    return path


@pytest.fixture
def pair():
    """``a`` asks ``b`` (member 1); both hold KEY."""
    b = Channels("127.0.0.1", "b", 5.0, lambda m: None, key=KEY)
    a = Channels("127.0.0.1", "a", 5.0, lambda m: b.address, key=KEY)
    CREATED.clear()
    yield a, b
    a.close()
    b.close()


class _Evil:
    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))  # unpickled, it would create the file


def _refused_after(sock: socket.socket, data: bytes, told: bytes = b"") -> bool:
    """Send ``data`` then see the listener close (or reset) the connection having answered nothing but, to a
    caller's opening, its nonce and :data:`~handshake.REFUSED` (``told``: what it must say)."""
    got = b""
    try:
        sock.sendall(data)
        while chunk := sock.recv(4096):
            got += chunk
    except OSError:
        pass
    if not data.startswith(handshake.MAGIC) and not told:
        return got == b""
    return got.endswith(told) and len(got) <= handshake.NONCE + handshake.DIGEST


def test_peers_holding_the_secret_are_answered(pair):
    a, _ = pair
    assert a.send(1, _create, ("x",)).result() == "x" and CREATED == ["x"]


def test_strangers_get_nothing_read_and_are_named_once(pair, tmp_path, channel_log):
    a, b = pair
    target = tmp_path / "pwned"
    frame = b"".join(bytes(v) for v in pack({"h": channel.handler_name(_create), "v": encode(("y",), [])}, []))
    probes = [
        bytes(range(256)) * 4,  # random bytes
        frame,  # a well-formed request, without the handshake
        pickle.dumps(_Evil(str(target))),  # what an unpickling listener would run
        handshake.MAGIC + b"\0" * handshake.NONCE + frame,  # the handshake begun, then a request for a proof
    ]
    for data in probes:
        with socket.create_connection(b.address, timeout=15) as s:
            assert _refused_after(s, data)
    deadline = time.monotonic() + 5
    while b._server.conns and time.monotonic() < deadline:
        time.sleep(0.02)  # polling the listener's state against a deadline
    assert not target.exists() and CREATED == []  # nothing created, nothing served
    lines = channel_log.refusals()
    assert len(lines) == 1 and "from 127.0.0.1" in lines[0], lines
    assert a.send(1, _create, ("z",)).result() == "z"  # the job's own peer is answered as before


def test_a_replayed_handshake_proves_nothing_and_a_listener_signs_nothing_for_a_stranger(pair):
    _, b = pair
    mine = b"\1" * handshake.NONCE
    with socket.create_connection(b.address, timeout=15) as s:  # a genuine session, recorded
        s.sendall(handshake.MAGIC + mine)
        theirs = s.recv(handshake.NONCE)
        assert len(theirs) == handshake.NONCE  # its nonce only: nothing derived from the secret yet
        proof = hmac.new(KEY, b"caller" + mine + theirs, hashlib.sha256).digest()
        s.sendall(proof)
        assert s.recv(handshake.DIGEST) == hmac.new(KEY, b"listener" + mine + theirs, hashlib.sha256).digest()
        s.sendall(b"".join(bytes(v) for v in pack({"h": channel.handler_name(_create), "v": encode(("ok",), [])}, [])))
        assert s.recv(4)  # answered
    with socket.create_connection(b.address, timeout=15) as s:  # the same bytes again: a new nonce, refused
        s.sendall(handshake.MAGIC + mine)
        s.recv(handshake.NONCE)
        assert _refused_after(s, proof, told=handshake.REFUSED)
    assert CREATED == ["ok"]


def test_a_flood_of_connections_from_one_host_leaves_the_job_served():
    b = Channels("127.0.0.1", "b", 5.0, lambda m: None, key=KEY)
    flood = []
    try:
        for _ in range(200):  # connections from 127.0.0.1 that never say a word
            flood.append(socket.create_connection(b.address, timeout=5))
        deadline = time.monotonic() + 5
        while sum(b._server.handshaking.values()) < channel.MAX_HANDSHAKING[0] and time.monotonic() < deadline:
            time.sleep(0.02)  # polling the listener's state against a deadline
        assert b._server.handshaking == {"127.0.0.1": channel.MAX_HANDSHAKING[0]}  # the rest closed unread
        # the job's peer (another host: 127.0.0.2) is answered meanwhile
        with socket.create_connection(b.address, timeout=5, source_address=("127.0.0.2", 0)) as peer:
            handshake.call(peer, KEY)
            peer.sendall(b"".join(bytes(v) for v in pack({"h": channel.handler_name(_create), "v": ["v"]}, [])))
            assert peer.recv(4)  # answered
    finally:
        for s in flood:
            s.close()
        b.close()


def test_a_listener_of_another_secret_is_refused_and_names_its_address():
    b = Channels("127.0.0.1", "b", 5.0, lambda m: None, key=hashlib.sha256(b"another job").digest())
    a = Channels("127.0.0.1", "a", 5.0, lambda m: b.address, key=KEY)
    CREATED.clear()
    try:
        with pytest.raises(ChannelRefused, match=rf"127.0.0.1:{b.address[1]}: the listener refused .* another secret"):
            a.send(1, _create, ("w",))
        assert CREATED == []
    finally:
        a.close()
        b.close()


def test_the_secret_comes_from_the_environment_or_a_file(tmp_path, monkeypatch):
    monkeypatch.delenv(handshake.SECRET_ENV, raising=False)
    monkeypatch.delenv(handshake.SECRET_FILE_ENV, raising=False)
    assert handshake.job_key() == b""
    monkeypatch.setenv(handshake.SECRET_ENV, "s3cret of this job")
    assert handshake.job_key() == hashlib.sha256(b"s3cret of this job").digest()
    monkeypatch.delenv(handshake.SECRET_ENV)
    (tmp_path / "secret").write_text("s3cret of this job\n")  # as a Kubernetes Secret mounts it
    monkeypatch.setenv(handshake.SECRET_FILE_ENV, str(tmp_path / "secret"))
    assert handshake.job_key() == hashlib.sha256(b"s3cret of this job").digest()
    (tmp_path / "short").write_text("hunter2\n")
    monkeypatch.setenv(handshake.SECRET_FILE_ENV, str(tmp_path / "short"))
    with pytest.raises(InputError, match=f"--secret-file {tmp_path / 'short'}: the secret has 7 characters, fewer"):
        handshake.job_key()
    (tmp_path / "empty").write_text("")
    for path, why in ((tmp_path / "empty", "the file is empty"), (tmp_path / "none", "cannot be read")):
        monkeypatch.setenv(handshake.SECRET_FILE_ENV, str(path))
        with pytest.raises(InputError, match=f"--secret-file {path}: {why}"):
            handshake.job_key()
    assert len(handshake.new_secret()) == 64 and handshake.new_secret() != handshake.new_secret()


def test_no_module_of_graphshard_uses_torch_rpc():
    src = Path(graphshard.__file__).parent
    users = [
        p
        for p in src.rglob("*.py")
        if re.search(r"torch\.distributed\.rpc|torch\.distributed import rpc", p.read_text())
    ]
    assert users == []

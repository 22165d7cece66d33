"""TLS on the channels: members with certificates of the run's CA talk (rows whole, in TLS 1.2 or later, the job
secret's handshake inside); a caller without TLS, or with a certificate of another CA, is refused and named; the
flags' files are checked and named. Certificates are made with the ``openssl`` command (skipped without it)."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from pathlib import Path

import pytest
import torch

from graphshard.distributed.transport import channel, handshake, tls
from graphshard.distributed.transport.channel import ChannelRefused, Channels
from graphshard.errors import InputError

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
KEY = b"k" * 32


@channel.handler
def _rows(n: int) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32).reshape(-1, 4)


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def _ca(d: Path, name: str) -> dict[str, str]:
    """A CA of its own in ``d`` and one certificate it signed: the three files, as the environment names them."""
    d.mkdir()
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        d / "ca.key",
        "-out",
        d / "ca.pem",
        "-days",
        "2",
        "-subj",
        f"/CN={name}-ca",
    )
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        d / "node.key",
        "-out",
        d / "node.csr",
        "-subj",
        f"/CN={name}-node",
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        d / "node.csr",
        "-CA",
        d / "ca.pem",
        "-CAkey",
        d / "ca.key",
        "-CAcreateserial",
        "-out",
        d / "node.pem",
        "-days",
        "2",
    )
    return {tls.CERT_ENV: str(d / "node.pem"), tls.KEY_ENV: str(d / "node.key"), tls.CA_ENV: str(d / "ca.pem")}


def _contexts(monkeypatch, files: dict[str, str]) -> tls.Tls:
    for k, v in files.items():
        monkeypatch.setenv(k, v)
    made = tls.tls_from_env()
    assert made is not None
    return made


def test_members_of_one_ca_talk_in_tls(tmp_path, monkeypatch):
    ours = _contexts(monkeypatch, _ca(tmp_path / "ours", "run"))
    b = Channels("127.0.0.1", "b", 5.0, lambda m: None, key=KEY, tls=ours)
    a = Channels("127.0.0.1", "a", 5.0, lambda m: b.address, key=KEY, tls=ours)
    try:
        got = a.send(1, _rows, (40_000,)).result()
        assert torch.equal(got, torch.arange(40_000, dtype=torch.float32).reshape(-1, 4))
        sock = a._idle_socks[1][0]  # the connection kept for the next request
        assert isinstance(sock, ssl.SSLSocket) and sock.version() in ("TLSv1.2", "TLSv1.3")
    finally:
        a.close()
        b.close()


def test_callers_without_tls_or_of_another_ca_are_refused(tmp_path, monkeypatch, channel_log):
    theirs = _contexts(monkeypatch, _ca(tmp_path / "theirs", "other"))
    ours = _contexts(monkeypatch, _ca(tmp_path / "ours", "run"))
    b = Channels("127.0.0.1", "b", 5.0, lambda m: None, key=KEY, tls=ours)
    stranger = Channels("127.0.0.1", "s", 5.0, lambda m: b.address, key=KEY, tls=theirs)
    plain = Channels("127.0.0.1", "p", 5.0, lambda m: b.address, key=KEY)  # the secret, but no TLS
    try:
        with pytest.raises(ChannelRefused, match=rf"127.0.0.1:{b.address[1]}: .*certificate verify failed"):
            stranger.send(1, _rows, (4,))
        with pytest.raises((ChannelRefused, channel.ChannelLost)):
            plain.send(1, _rows, (4,))
        with socket.create_connection(b.address, timeout=5) as s:  # the handshake in the clear: no answer
            s.sendall(handshake.MAGIC + b"\0" * handshake.NONCE)
            s.settimeout(5)
            try:
                got = s.recv(100)
            except OSError:
                got = b""
            assert not got.startswith(b"\0" * 8) and len(got) < handshake.NONCE + handshake.DIGEST
    finally:
        for c in (stranger, plain, b):
            c.close()
    assert any("refused a channel connection from 127.0.0.1" in line for line in channel_log.refusals())


def test_the_flags_go_together_and_name_their_files(tmp_path, monkeypatch):
    files = _ca(tmp_path / "ours", "run")
    for k in files:
        monkeypatch.delenv(k, raising=False)
    assert tls.tls_from_env() is None
    monkeypatch.setenv(tls.CERT_ENV, files[tls.CERT_ENV])
    with pytest.raises(InputError, match="--tls-cert, --tls-key and --tls-ca go together: --tls-key, --tls-ca"):
        tls.tls_from_env()
    monkeypatch.setenv(tls.KEY_ENV, files[tls.KEY_ENV])
    monkeypatch.setenv(tls.CA_ENV, str(tmp_path / "nope.pem"))
    with pytest.raises(InputError, match=f"--tls-ca {tmp_path / 'nope.pem'}: No such file"):
        tls.tls_from_env()
    monkeypatch.setenv(tls.CA_ENV, files[tls.CA_ENV])
    monkeypatch.setenv(tls.KEY_ENV, files[tls.CA_ENV])  # not the certificate's key
    with pytest.raises(InputError, match="--tls-cert / --tls-key"):
        tls.tls_from_env()

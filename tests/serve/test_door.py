"""``graphshard serve`` holds its door: a client that trickles header bytes is closed (408) once its read
deadline passes, and one client address holds at most ``--max-client-connections`` connections (the next gets
503 at once), while a client from another address is answered all along. Clients bind distinct loopback
addresses (127.0.0.2, ...) to be distinct clients to the service."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from graphshard import partition_graph
from graphshard.train import TrainOptions, train
from tests.graphs import small_homo
from tests.serve.service import running

READ_TIMEOUT, PER_CLIENT = 1.5, 3


@pytest.fixture(scope="module")
def door(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("door")
    partition_graph(small_homo(), "s", 1, tmp / "p", part_method="random")
    config, ckpt = str(tmp / "p" / "s.json"), str(tmp / "ckpt")
    train(TrainOptions(part_config=config, epochs=1, fanouts=[3, 3], progress=False, checkpoint=ckpt), num_procs=1)
    args = ["--part-config", config, "--checkpoint", ckpt, "--num-procs", "1"]
    limits = ["--read-timeout", str(READ_TIMEOUT), "--max-client-connections", str(PER_CLIENT)]
    with running([*args, *limits], tmp) as (url, _):
        yield url


def _client(url: str, source: str) -> socket.socket:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    s = socket.socket()
    s.settimeout(READ_TIMEOUT * 4)
    s.bind((source, 0))
    s.connect((host, int(port)))
    return s


def _read_all(s: socket.socket) -> bytes:
    got = b""
    while chunk := s.recv(4096):
        got += chunk
    return got


def test_a_trickling_client_is_closed_at_its_read_deadline(door):
    s = _client(door, "127.0.0.2")
    began = time.monotonic()
    s.sendall(b"GET /healthz HTTP/1.1\r\n")
    closed = None
    for _ in range(int(READ_TIMEOUT * 4 / 0.25)):  # one header byte every 0.25 s, as a slow-loris client does
        time.sleep(0.25)
        try:
            s.sendall(b"X")
        except OSError:
            closed = time.monotonic() - began
            break
    got = _read_all(s) if closed is None else b""
    closed = closed or time.monotonic() - began
    assert closed < READ_TIMEOUT + 2.0, f"still open after {closed:.1f} s"
    assert got.startswith(b"HTTP/1.1 408") or closed is not None
    s.close()


def test_one_client_holds_at_most_its_share_while_others_are_answered(door):
    held = [_client(door, "127.0.0.3") for _ in range(PER_CLIENT)]  # idle: no byte sent
    extra = _client(door, "127.0.0.3")
    assert _read_all(extra).startswith(b"HTTP/1.1 503"), "the client's next connection was not refused"
    r = httpx.get(f"{door}/healthz", timeout=10)  # another client, from 127.0.0.1
    assert r.status_code == 200
    for s in held:  # each idle connection is closed at its read deadline with a 408
        assert _read_all(s).startswith(b"HTTP/1.1 408")
        s.close()
    again = _client(door, "127.0.0.3")  # its share is free again
    again.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
    assert _read_all(again).startswith(b"HTTP/1.1 200")
    again.close()
    extra.close()

"""The heartbeat on loopback: a silent peer is named (rank, host, what it was doing) within its bound; a
peer that leaves is never taken for a lost one; a failed peer is named after the grace; datagrams of
another run are ignored; a rank held up itself (in a read, or stopped with its peer) does not blame its
peers; torchrun reads the error file."""

from __future__ import annotations

import hashlib
import hmac
import json
import select
import socket
import threading
import time
import types

import pytest

from graphshard.distributed.transport import liveness
from graphshard.distributed.transport.liveness import Heartbeat

LOST_AFTER = 0.6


class Pair:
    """Two heartbeats (ranks 0 and 1) on loopback; what rank 0 reports, with the time it reported."""

    def __init__(self, lost_after: float = LOST_AFTER):
        self.lines: list[tuple[float, str]] = []
        self.got = threading.Event()

        def report(line: str) -> None:
            self.lines.append((time.monotonic(), line))
            self.got.set()

        self.a = Heartbeat(0, 2, "127.0.0.1", lost_after, on_lost=report)
        self.b = Heartbeat(1, 2, "127.0.0.1", lost_after, on_lost=lambda line: None)
        published = {0: self.a.open(), 1: self.b.open()}
        self.a.start(published)
        self.b.start(published)

    def close(self) -> None:
        for beat in (self.a, self.b):
            beat._stop.set()


@pytest.fixture
def pair():
    p = Pair()
    yield p
    p.close()


def test_a_silent_peer_is_named_within_the_bound(pair):
    liveness.doing("training epoch 3, batch 7")  # both heartbeats run in this process: both say it
    time.sleep(3 * LOST_AFTER)  # alive meanwhile: nothing reported (a wait that must pass, not a synchronisation)
    assert pair.lines == []
    pair.b._stop.set()  # rank 1 goes silent, as a frozen process or a cut link does
    silent = time.monotonic()
    assert pair.got.wait(5)
    at, line = pair.lines[0]
    assert LOST_AFTER - pair.a.interval - 0.05 <= at - silent <= LOST_AFTER + 0.5  # from its last beat
    assert line.startswith("lost rank 1 on host 127.0.0.1: no heartbeat for ")
    assert "while it was training epoch 3, batch 7; noticed by rank 0 on 127.0.0.1" in line


def test_a_peer_that_leaves_is_not_lost_and_a_failed_one_is_named(pair):
    pair.b.leave()  # done
    assert not pair.got.wait(4 * LOST_AFTER)
    failed = Pair()
    try:
        failed.b.leave("ValueError: bad row 12 (at x.py:3)")
        assert failed.got.wait(5)
        assert failed.lines[0][1].startswith("rank 1 on host 127.0.0.1 failed while ")
        assert failed.lines[0][1].split(": ", 1)[1].startswith("ValueError: bad row 12 (at x.py:3); noticed by rank 0")
    finally:
        failed.close()


def test_a_failed_peer_is_named_at_once_to_a_rank_that_asks():
    p = Pair(lost_after=30)
    try:
        p.b.leave("OSError: disk full")
        start = time.monotonic()
        line = p.a.await_finding(5)
        assert line is not None and "OSError: disk full" in line and time.monotonic() - start < 2
    finally:
        p.close()


def _signed(key: bytes, nonce: bytes, count: int) -> bytes:
    body = liveness._HEADER.pack(liveness._MAGIC, liveness.BEAT, 1, nonce, count) + b"alive"
    return body + hmac.new(key, body, hashlib.sha256).digest()[: liveness._MAC]


@pytest.mark.parametrize("forged", ["another run", "no secret", "replayed"])
def test_datagrams_of_another_run_without_the_secret_or_replayed_are_ignored(pair, forged):
    """Rank 1 falls silent; a stranger keeps sending its heartbeats: another run's nonce, rank 1's nonce (read
    from the store) without the job's secret, or a genuine heartbeat of rank 1's recorded and replayed."""
    pair.a.key = pair.b.key = b"the job's key"
    pair.b._stop.set()
    nonce = pair.b.nonce if forged != "another run" else b"\0" * 8
    count = 1 if forged == "replayed" else 10**9  # a count seen already, or one far ahead
    fake = _signed(b"a guess" if forged == "no secret" else pair.b.key, nonce, count)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _ in range(int(3 * LOST_AFTER / 0.05)):
            s.sendto(fake, pair.a._sock.getsockname())
            time.sleep(0.05)  # pacing the forged datagrams
    assert pair.lines and pair.lines[0][1].startswith("lost rank 1")


def test_a_rank_held_up_itself_does_not_blame_its_peers():
    p = Pair(lost_after=1.0)
    try:
        real = p.a._read
        held = threading.Event()

        def stall(sock) -> None:  # the thread's first read after start is held up for 3 x lost_after
            if not held.is_set():
                held.set()
                time.sleep(3.0)
            real(sock)

        p.a._read = stall
        time.sleep(4.0)  # past the stall (a wait that must pass)
        assert held.is_set() and p.a._thread is not None and p.a._thread.is_alive()  # it stalled, and goes on
        assert p.lines == []
    finally:
        p.close()


def test_a_rank_stopped_in_its_wait_together_with_its_peer_does_not_blame_it(monkeypatch):
    """The whole process stops (SIGSTOP, swapping, a starved machine) while rank 0's thread waits for
    datagrams: rank 1 sends nothing meanwhile, and on waking rank 0 must not take that silence for rank 1's."""
    p = Pair(lost_after=1.0)
    try:
        held, thawed = threading.Event(), threading.Event()
        send = p.b._send_all  # rank 1 stops at the same instant: nothing sent after rank 0's wait began
        p.b._send_all = lambda kind, text: None if held.is_set() and not thawed.is_set() else send(kind, text)

        def wait(r, w, x, timeout):  # both heartbeat threads stop in their wait, as a stopped process's do
            if threading.current_thread() is p.a._thread and not held.is_set():
                held.set()
                p.a._read(p.a._sock)  # what rank 1 sent before it stopped is read now, as a running process would
                time.sleep(2.0)  # 2 x lost_after without a beat either way
                thawed.set()
                return [], [], []
            if threading.current_thread() is p.b._thread and held.is_set() and not thawed.is_set():
                thawed.wait(5)
                return [], [], []
            return select.select(r, w, x, timeout)

        monkeypatch.setattr(liveness, "select", types.SimpleNamespace(select=wait))
        time.sleep(3.0)  # past the stop and a lost_after more (a wait that must pass)
        assert held.is_set() and p.a._thread is not None and p.a._thread.is_alive()
        assert p.lines == []
        p.b._stop.set()  # and a peer silent after that is still found
        assert p.got.wait(5) and p.lines[0][1].startswith("lost rank 1")
    finally:
        p.close()


def test_torchruns_agent_reads_the_error_file(tmp_path, monkeypatch):
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    path = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))
    liveness.write_error_file("lost rank 1 on host 10.0.0.2: no heartbeat")
    failure = ProcessFailure(local_rank=0, pid=1, exitcode=1, error_file=str(path))
    assert json.loads(path.read_text())["message"]["message"] == "lost rank 1 on host 10.0.0.2: no heartbeat"
    assert failure.message["extraInfo"]["py_callstack"] == "lost rank 1 on host 10.0.0.2: no heartbeat"

"""Direct channels: values and tensors of every dtype arrive equal, large answers and answers sent in pieces
whole; handler errors, unknown handlers, closed peers and silent peers are raised as such, each within its
bound, and a caller that stops reading or goes silent half-way through a request frees the answering thread;
concurrent callers get their own answers; the listener binds to the address given and survives a stream that
is not a channel's."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from graphshard.distributed.transport import channel, handshake
from graphshard.distributed.transport.channel import ChannelLost, Channels, RemoteFailure
from graphshard.distributed.transport.frames import FrameReader, decode, encode, pack
from graphshard.errors import InputError

RELEASE = threading.Event()


@channel.handler
def _echo(*args):
    return args


@channel.handler
def _scaled(rows: torch.Tensor, by: float) -> list:
    return [rows * by, (rows.shape[0], None)]


@channel.handler
def _fails(what: str):
    raise ValueError(f"no feature {what!r}\nsecond line")


@channel.handler
def _blocks():
    RELEASE.wait(30)  # released by the test; bounded so a failed test cannot leave it waiting
    return 1


@channel.handler
def _as_dict():
    return {"a": 1}


def _not_a_handler():
    return 1


@pytest.fixture
def pair():
    """Two members on loopback: ``a`` asks ``b`` (member 1)."""
    b = Channels("127.0.0.1", "b", 5.0, lambda m: None)
    a = Channels("127.0.0.1", "a", 5.0, lambda m: b.address)
    yield a, b
    RELEASE.set()
    a.close()
    b.close()
    RELEASE.clear()


def _tensors() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    out = [torch.randn(7, 3, generator=g).to(t) for t in (torch.float64, torch.float32, torch.float16, torch.bfloat16)]
    out += [torch.randint(-100, 100, (11,), generator=g).to(t) for t in (torch.int64, torch.int32, torch.int16)]
    out += [torch.randint(0, 100, (2, 2, 2), generator=g).to(torch.int8), torch.tensor([0, 255], dtype=torch.uint8)]
    out += [torch.tensor([True, False, True]), torch.empty(0, 4), torch.tensor(3.5), torch.arange(12).reshape(3, 4).T]
    out += [torch.tensor([0, 2**16 - 1, 2**32 - 1, 2**40], dtype=torch.int64).to(t) for t in (torch.uint64,)]
    out += [torch.tensor([0, 2**16 - 1], dtype=torch.int32).to(torch.uint16), torch.tensor([7], dtype=torch.uint32)]
    return out


def test_encoding_keeps_structure_and_every_dtype():
    value = ("key", [1, 2.5, None, True], (np.int64(4), np.float32(0.5)), np.arange(5, dtype=np.int32), _tensors())
    zero_d = np.array(5.0)
    arrays0: list[torch.Tensor] = []
    assert decode(encode(zero_d, arrays0), arrays0).shape == ()
    arrays: list[torch.Tensor] = []
    back = decode(encode(value, arrays), arrays)
    assert back[0] == "key" and back[1] == [1, 2.5, None, True] and back[2] == (4, 0.5)
    assert isinstance(back[3], np.ndarray) and back[3].tolist() == [0, 1, 2, 3, 4]
    for got, want in zip(back[4], _tensors()):
        assert got.dtype == want.dtype and torch.equal(got, want)
    with pytest.raises(TypeError, match="cannot carry dict"):
        encode({"a": 1}, [])


def test_a_request_returns_the_handlers_value_over_the_wire(pair):
    a, b = pair
    tensors = _tensors()
    got = a.send(1, _echo, ("x", tensors, np.arange(4))).result()
    assert got[0] == "x" and got[2].tolist() == [0, 1, 2, 3]
    for g, w in zip(got[1], tensors):  # received into fresh, writable memory: not views of what was sent
        assert g.dtype == w.dtype and torch.equal(g, w) and (not g.numel() or g.data_ptr() != w.data_ptr())
    rows = torch.arange(20_000 * 32, dtype=torch.float32).reshape(20_000, 32)  # larger than a socket buffer
    scaled, (n, none) = a.send(1, _scaled, (rows, 0.5)).result()
    assert torch.equal(scaled, rows * 0.5) and n == 20_000 and none is None
    assert a.stats["requests"] == 2 and a.address[0] == "127.0.0.1" and b.address[0] == "127.0.0.1"


def test_handler_errors_come_back_as_their_last_line_and_the_connection_stays_usable(pair):
    a, _ = pair
    with pytest.raises(RemoteFailure, match=r"^ValueError: no feature 'x'$"):
        a.send(1, _fails, ("x",)).result()
    assert a.send(1, _echo, (1,)).result() == (1,)
    with pytest.raises(TypeError, match="not a channel handler"):
        a.send(1, _not_a_handler, ())
    with pytest.raises(TypeError, match="cannot carry tensors of complex64"):  # refused before sending
        a.send(1, _echo, (torch.zeros(2, dtype=torch.complex64),))
    with pytest.raises(RemoteFailure, match="^TypeError: a channel cannot carry dict$"):  # an answer it cannot frame
        a.send(1, _as_dict, ()).result()
    assert a.send(1, _echo, (3,)).result() == (3,)


def test_a_closed_peer_is_lost_at_once(pair):
    a, b = pair
    assert a.send(1, _echo, (1,)).result() == (1,)  # a connection is open and idle
    b.close()
    start = time.monotonic()
    with pytest.raises(ChannelLost) as lost:
        a.send(1, _echo, (2,)).result()
    assert not lost.value.timed_out and time.monotonic() - start < 2


def test_no_listener_is_lost_at_once():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()  # bound, not listening: connections are refused
        a = Channels("127.0.0.1", "a", 5.0, lambda m: free)
        try:
            with pytest.raises(ChannelLost, match="cannot connect to 127.0.0.1"):
                a.send(1, _echo, ())
        finally:
            a.close()


def test_a_silent_peer_times_out_and_a_check_ends_the_wait_sooner():
    b = Channels("127.0.0.1", "b", 5.0, lambda m: None)
    a = Channels("127.0.0.1", "a", 0.5, lambda m: b.address)
    try:
        start = time.monotonic()
        with pytest.raises(ChannelLost) as lost:
            a.send(1, _blocks, ()).result()
        assert lost.value.timed_out and 0.5 <= time.monotonic() - start < 3

        class Gone(Exception):
            pass

        def check():
            if time.monotonic() - start > 0.2:
                raise Gone

        a.timeout = 30.0
        start = time.monotonic()
        with pytest.raises(Gone):
            a.send(1, _blocks, ()).result(check)
        assert time.monotonic() - start < 2
    finally:
        RELEASE.set()
        a.close()
        b.close()
        RELEASE.clear()


def test_concurrent_callers_get_their_own_answers(pair):
    a, _ = pair

    def ask(i: int) -> bool:
        rows = torch.full((1000 + i, 8), float(i))
        return all(torch.equal(a.send(1, _echo, (rows, i)).result()[0], rows) for _ in range(5))

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(ask, range(16)))


def test_a_stream_that_is_not_a_channels_is_dropped_and_the_listener_lives_on(pair):
    a, b = pair
    heads = [b"{nope", b'{"h":"x","a":[["complex",[1]]]}', b'{"h":"x","a":[["int64","x"]]}']
    heads += [b'{"h":"x","a":[["int64",[%s]]]}' % d for d in (b"-8", b"2.5", b"true")]  # impossible shapes
    for junk in [b"\xff\xff\xff\xff" + b"x" * 8] + [len(h).to_bytes(4, "little") + h for h in heads]:
        with socket.create_connection(b.address, timeout=5) as s:
            handshake.call(s, b"")  # a peer of the job (the pair has no secret) that then sends junk
            try:
                s.sendall(junk)
                s.shutdown(socket.SHUT_WR)
                dropped = s.recv(1) == b""  # the server closed it...
            except OSError:  # ...or reset it before reading all of it
                dropped = True
            assert dropped
    assert a.send(1, _echo, ("ok",)).result() == ("ok",)


def test_a_cancelled_request_frees_nothing_it_should_not(pair):
    a, _ = pair
    pending = a.send(1, _echo, (torch.arange(10),))
    pending.cancel()  # the caller failed before reading the answer: its connection is closed, not reused
    with pytest.raises(ChannelLost, match="already answered or cancelled"):
        pending.result()
    assert a.send(1, _echo, (2,)).result() == (2,)


@channel.handler
def _big(n: int) -> torch.Tensor:
    return torch.arange(n, dtype=torch.int64)


def test_a_large_answer_arrives_whole(pair):
    a, _ = pair
    n = 3_000_001  # 24 MB: many times the socket buffers, received in one call per tensor
    got = a.send(1, _big, (n,)).result()
    assert got.dtype == torch.int64 and got.shape == (n,) and int(got[-1]) == n - 1
    assert torch.equal(got[::99_991], torch.arange(0, n, 99_991))


def test_an_answer_that_arrives_in_pieces_is_read_whole_and_the_check_runs_meanwhile():
    """A peer that sends half an answer, pauses for 3 of the caller's receive bounds, then the rest: the caller
    gets it all, and looked at its check while it waited."""
    rows = torch.arange(40_000, dtype=torch.float32).reshape(10_000, 4)
    bufs = pack({"v": {"T": 0}}, [rows])
    payload = b"".join(bytes(b) for b in bufs)
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            handshake.answer(conn, b"")
            conn.settimeout(5.0)
            FrameReader(conn).frame()  # the request
            conn.sendall(payload[: len(payload) // 2])
            time.sleep(3 * channel._POLL)  # the pause under test, not a synchronisation
            conn.sendall(payload[len(payload) // 2 :])

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    a = Channels("127.0.0.1", "a", 5.0, lambda m: listener.getsockname()[:2])
    looks = []
    try:
        got = a.send(1, _echo, ()).result(lambda: looks.append(1))
        assert torch.equal(got, rows) and len(looks) >= 2
    finally:
        server.join(10)
        a.close()
        listener.close()


class _CountingSocket:
    """A socket whose receive calls are counted (each is a wake-up of the reading thread)."""

    def __init__(self, sock: socket.socket):
        self.sock, self.reads = sock, 0

    def recv_into(self, view):
        self.reads += 1
        return self.sock.recv_into(view)

    def __getattr__(self, name):
        return getattr(self.sock, name)


@pytest.mark.parametrize("bulk", [True, False])
def test_a_long_array_that_trickles_in_wakes_its_reader_a_few_times_only_in_bulk_mode(bulk):
    """1 MB of rows sent in 64 pieces, paced (a slow link): read with the low-water mark, the reader is woken a
    few times, not once a piece; the rows arrive whole either way, and the socket's mark is the default after."""
    rows = torch.arange(1 << 18, dtype=torch.float32)
    payload = b"".join(bytes(b) for b in pack({"v": {"T": 0}}, [rows]))
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)  # room for the whole array, on any host
    client.connect(listener.getsockname())
    conn, _ = listener.accept()

    def trickle() -> None:
        step = len(payload) // 64 + 1
        for i in range(0, len(payload), step):
            conn.sendall(payload[i : i + step])
            time.sleep(0.002)  # pacing, as a slow link would

    sender = threading.Thread(target=trickle, daemon=True)
    try:
        client.settimeout(5.0)
        counted = _CountingSocket(client)
        sender.start()
        header, arrays = FrameReader(counted, time.monotonic() + 10, bulk=bulk).frame()
        assert torch.equal(arrays[0], rows)
        assert counted.reads <= 6 if bulk else counted.reads >= 20
        assert client.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
    finally:
        sender.join(10)
        for s in (client, conn, listener):
            s.close()


def test_a_caller_that_stops_reading_frees_the_answering_thread_in_time():
    b = Channels("127.0.0.1", "b", 0.5, lambda m: None)
    a = Channels("127.0.0.1", "a", 5.0, lambda m: b.address)
    try:
        unread = a.send(1, _big, (1 << 24,))  # 128 MB that nobody reads: more than any socket buffer holds
        deadline = time.monotonic() + 10
        for present in (True, False):  # the connection is accepted; then its thread gives up and closes it
            while bool(b._server.conns) != present and time.monotonic() < deadline:
                time.sleep(0.05)
            assert bool(b._server.conns) == present
        unread.cancel()
    finally:
        a.close()
        b.close()


def test_the_request_priority_setting(monkeypatch):
    monkeypatch.delenv("GRAPHSHARD_REQUEST_PRIORITY", raising=False)
    assert channel.request_priority() == 6  # TC_PRIO_INTERACTIVE: pfifo_fast's first band
    monkeypatch.setenv("GRAPHSHARD_REQUEST_PRIORITY", "0")
    assert channel.request_priority() == 0
    for bad in ("7", "-1", "high"):
        monkeypatch.setenv("GRAPHSHARD_REQUEST_PRIORITY", bad)
        with pytest.raises(
            InputError, match=f"GRAPHSHARD_REQUEST_PRIORITY='{bad}': expected a whole number from 0 to 6"
        ):
            Channels("127.0.0.1", "a", 1.0, lambda m: None)


def test_a_caller_silent_half_way_through_a_request_frees_the_answering_thread_in_time():
    b = Channels("127.0.0.1", "b", 0.5, lambda m: None)
    try:
        frame = b"".join(bytes(v) for v in pack({"h": "x"}, [torch.arange(1000)]))
        for cut in (2, 40, len(frame) - 100):  # in the length, the header, an array
            with socket.create_connection(b.address, timeout=5) as s:
                handshake.call(s, b"")
                s.settimeout(5)
                s.sendall(frame[:cut])  # ...and nothing more, the connection left open
                start = time.monotonic()
                try:
                    closed = s.recv(1) == b""  # the server gives up on it: it closes the connection...
                except TimeoutError:  # (still open after 5 s)
                    closed = False
                except OSError:  # ...or resets it
                    closed = True
                assert closed and time.monotonic() - start < 4.0, cut
        deadline = time.monotonic() + 5
        while b._server.conns and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not b._server.conns
        idle = socket.create_connection(b.address, timeout=1.0)  # a caller between requests is waited for
        handshake.call(idle, b"")
        idle.settimeout(1.0)
        with idle, pytest.raises(TimeoutError):
            idle.recv(1)
    finally:
        b.close()

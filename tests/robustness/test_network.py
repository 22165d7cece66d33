"""Nothing the product opens listens beyond the address it was given (loopback by default), read from
the operating system's own socket table while a 2-rank job with sampler workers runs."""

from __future__ import annotations

import gc
import ipaddress
import multiprocessing
import os
import socket
import threading
from pathlib import Path

import pytest

from graphshard import InputError, partition_graph
from graphshard.distributed.ranks.launcher import launch
from graphshard.distributed.transport.network import check_host, listen_socket
from graphshard.errors import DistError
from tests.graphs import small_homo


def _socket_inodes(pids: set[int]) -> dict[str, int]:
    inodes = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes[target[8:-1]] = pid
    return inodes


def _address(hexaddr: str, family: int) -> str:
    raw = bytes.fromhex(hexaddr)
    if family == socket.AF_INET:
        return socket.inet_ntop(family, raw[::-1])
    return socket.inet_ntop(family, b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4)))


def listening(pids: set[int]) -> list[tuple[int, str, int]]:
    """(pid, address, port) of every TCP socket in LISTEN state, and every UDP socket that can receive (the
    heartbeats), owned by ``pids`` (from /proc/net/{tcp,udp}{,6})."""
    inodes = _socket_inodes(pids)
    found = []
    for name, family, state in (
        ("tcp", socket.AF_INET, "0A"),
        ("tcp6", socket.AF_INET6, "0A"),  # 0A: LISTEN
        ("udp", socket.AF_INET, "07"),
        ("udp6", socket.AF_INET6, "07"),
    ):  # 07: unconnected
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == state and fields[9] in inodes:
                addr, port = fields[1].split(":")
                found.append((inodes[fields[9]], _address(addr, family), int(port, 16)))
    return found


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def _rank(config: str, up, done) -> None:
    """A rank that starts everything that listens (store, gloo, RPC, sampler workers), then waits."""
    from graphshard.distributed.loaders.loader import DistNeighborLoader
    from graphshard.distributed.runtime.graph import DistGraph
    from graphshard.distributed.runtime.session import session

    with session(timeout=60) as s:
        dg = DistGraph("s", config)
        seeds = dg.get_partition_book().partid2nids(s.rank).numpy()
        with DistNeighborLoader(dg, [3, 3], seeds, batch_size=8, num_workers=1) as loader:
            assert list(loader)  # the workers have served every batch and are still up, idle
            s.group.barrier("all listening")
            if s.rank == 0:
                up.set()
            assert done.wait(60), "the test never finished reading the socket table"
            s.group.barrier("checked")


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc socket table")
@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2"])
def test_a_distributed_job_listens_on_loopback_only(tmp_path, host):
    """The rendezvous store and the channels listen on the address given; gloo can only be bound to a
    network interface: the one holding that address (here loopback, whatever 127.x address is given)."""
    partition_graph(small_homo(), "s", 2, tmp_path / "p", part_method="random")
    ctx = multiprocessing.get_context("spawn")
    up, done = ctx.Event(), ctx.Event()
    seen: list = []

    def watch() -> None:
        if up.wait(120):
            seen.extend(listening({os.getpid()} | descendants(os.getpid())))
        done.set()

    before = set(listening({os.getpid()}))  # another test's socket still open in this worker is not this job's
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    launch(_rank, 2, (str(tmp_path / "p" / "s.json"), up, done), host=host, timeout=60)
    watcher.join(10)
    seen = [s for s in seen if s not in before]
    assert seen, "no listening socket seen: the job did not reach its loop"
    pids = {pid for pid, _, _ in seen}
    assert os.getpid() in pids and len(pids) >= 3  # the launcher's store, the ranks, their workers
    outside = [(pid, addr, port) for pid, addr, port in seen if not ipaddress.ip_address(addr).is_loopback]
    assert outside == [], f"listening beyond loopback: {outside}"
    assert {addr for pid, addr, _ in seen if pid == os.getpid()} == {host}  # the rendezvous store


def _fail() -> None:
    raise ValueError("this rank fails on purpose")


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc socket table")
def test_a_failed_launch_stops_listening_before_it_raises():
    """The rendezvous store closes when ``launch`` ends, failure included: the error a caller holds (whose
    traceback keeps the launcher's frame) must not keep a port open until the garbage collector runs."""
    before = set(listening({os.getpid()}))
    gc.disable()
    try:
        with pytest.raises(DistError, match="this rank fails on purpose") as caught:
            launch(_fail, 2, (), host="127.0.0.1", timeout=60)
        assert caught.value.__traceback__ is not None  # the frame is still reachable through the error
        assert set(listening({os.getpid()})) - before == set()
    finally:
        gc.enable()


def test_wildcard_and_unresolvable_addresses_are_refused():
    for host in ("0.0.0.0", "::"):
        with pytest.raises(InputError, match="would listen on every interface"):
            check_host(host)
    with pytest.raises(InputError, match="does not resolve"):
        check_host("no-such-host.invalid")
    sock = listen_socket("127.0.0.1", 0)
    try:
        assert sock.getsockname()[0] == "127.0.0.1"
    finally:
        sock.close()


FLOOD = 1000  # connections opened and closed at once on every TCP port of the job


def _probed_rank(config: str, up, done) -> None:
    """A rank with everything that listens up (store, gloo, channels, heartbeats, sampler workers); once the
    test has thrown junk at every port, it trains on: another pass of the loader, then a barrier."""
    from graphshard.distributed.loaders.loader import DistNeighborLoader
    from graphshard.distributed.runtime.graph import DistGraph
    from graphshard.distributed.runtime.session import session

    with session(timeout=60) as s:
        dg = DistGraph("s", config)
        seeds = dg.get_partition_book().partid2nids(s.rank).numpy()
        with DistNeighborLoader(dg, [3, 3], seeds, batch_size=8, num_workers=1) as loader:
            first = sum(b.num_nodes for b in loader)
            s.group.barrier("all listening")
            if s.rank == 0:
                up.set()
            assert done.wait(120), "the test never finished probing the ports"
            assert sum(b.num_nodes for b in loader) > 0 and first > 0  # the loader still serves whole epochs
            s.group.barrier("probed, and still a job")


def _junk(host: str, port: int) -> None:
    """Random bytes, a frame cut short, and a flood of connections that close at once."""
    for payload in (os.urandom(64 << 10), b'\x00\x00\x01\x00{"k":', b"\xff" * 7):
        try:
            with socket.create_connection((host, port), timeout=2) as c:
                c.sendall(payload)
        except OSError:
            pass  # refused or reset: the port defended itself, which is what the test wants to see
    opened = []
    try:
        for _ in range(FLOOD):
            try:
                opened.append(socket.create_connection((host, port), timeout=2))
            except OSError:
                break
    finally:
        for c in opened:
            c.close()


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc socket table")
def test_no_bytes_from_outside_kill_a_run(tmp_path):
    """Random bytes, a short frame and a 1,000-connection flood on every TCP port a 2-rank job listens on, and
    random datagrams on its UDP (heartbeat) ports: the run goes on and ends with its normal result."""
    partition_graph(small_homo(), "s", 2, tmp_path / "p", part_method="random")
    ctx = multiprocessing.get_context("spawn")
    up, done = ctx.Event(), ctx.Event()
    probed: list = []

    def probe() -> None:
        try:
            if up.wait(120):
                ports = [p for p in listening({os.getpid()} | descendants(os.getpid())) if p not in before]
                for _, addr, port in ports:
                    if any(port == q for _, _, q in probed):
                        continue
                    probed.append((None, addr, port))
                    _junk(addr, port)
                udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                for _, addr, port in ports:
                    for _ in range(20):
                        udp.sendto(os.urandom(64), (addr, port))  # to a TCP port too: nothing listens there
                udp.close()
        finally:
            done.set()

    before = set(listening({os.getpid()}))
    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    launch(_probed_rank, 2, (str(tmp_path / "p" / "s.json"), up, done), host="127.0.0.1", timeout=60)
    prober.join(10)
    assert len(probed) >= 4, f"too few ports probed: {probed}"

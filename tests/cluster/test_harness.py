"""The emulated cluster itself: hosts that reach each other only over their links, see only their own
files, can be cut off, capped, frozen and killed, and leave nothing behind."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.ranks import state

from .harness import SUBNET, Cluster

PY = sys.executable
_ECHO = (
    "import socket,sys; s=socket.create_server((sys.argv[1], 7000)); c,_=s.accept(); "
    "c.sendall(open('mine.txt','rb').read()); c.close()"
)
_ASK = "import socket,sys; s=socket.create_connection((sys.argv[1], 7000), timeout=5); print(s.recv(100).decode())"


def _connect(c: Cluster, server: int, client: int, timeout: float = 20) -> str:
    srv = c.run(server, [PY, "-c", _ECHO, c.hosts[server].address], name="server")
    deadline = time.monotonic() + timeout
    while True:  # until the server listens (each try is itself bounded by a 5 s connect timeout)
        ask = c.run(client, [PY, "-c", _ASK, c.hosts[server].name], name="client")
        if ask.wait(timeout) == 0:
            break
        assert time.monotonic() < deadline, ask.tail()
        time.sleep(0.1)  # retrying a refused connection, bounded by the deadline
    srv.wait(timeout)
    return ask.output().strip()


def test_hosts_talk_by_name_and_see_only_their_own_files(cluster):
    c = cluster(2)
    for h in c.hosts:
        (h.workdir / "mine.txt").write_text(f"files of {h.name}")
    assert [h.address for h in c.hosts] == [f"{SUBNET}.1", f"{SUBNET}.2"]
    assert _connect(c, 1, 0) == "files of node1"
    peek = c.run(
        0, [PY, "-c", f"import os; print(os.listdir({str(c.hosts[1].workdir)!r}), os.uname().nodename)"], name="peek"
    )
    assert peek.wait(20) == 0
    assert peek.output().split() == ["[]", "node0"], peek.output()  # node1's directory is hidden from node0


def test_cut_heal_shape_and_teardown(cluster):
    c = cluster(2, rate="100mbit")
    shown = subprocess.run(
        ["ip", "netns", "exec", c.hosts[0].netns, "tc", "qdisc", "show", "dev", "eth0"], capture_output=True, text=True
    ).stdout
    assert "tbf" in shown and "100Mbit" in shown, shown
    assert f"qdisc {c.link_queue} " in shown and "parent 1:1" in shown, shown  # the kernel's default, behind it
    (c.hosts[1].workdir / "mine.txt").write_text("up")
    c.cut(1)
    ask = c.run(0, [PY, "-c", _ASK, c.hosts[1].address], name="cut")
    assert ask.wait(20) != 0  # no route across a cut link
    c.heal(1)
    assert _connect(c, 1, 0) == "up"
    names = [h.netns for h in c.hosts] + [c.switch]
    c.down()
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(n in left.split() for n in names), left


def test_frozen_and_killed_processes(cluster):
    c = cluster(2)
    p = c.run(1, [PY, "-c", "import time; time.sleep(60)"], name="sleeper")
    deadline = time.monotonic() + 10

    def comm(pid: int) -> str:
        try:
            return open(f"/proc/{pid}/comm").read().strip()
        except FileNotFoundError:
            return ""

    # until the sleeper itself runs (the host's start-up shell has become Python): its helpers (hostname,
    # mount) are done by then, so what is frozen is what stays on the host
    while not (sleeper := [pid for pid in c.pids(1) if comm(pid).startswith("python")]):
        assert time.monotonic() < deadline
        time.sleep(0.05)  # polling for the process to appear, against a deadline
    frozen = c.freeze(1)

    def stopped() -> bool:
        # the processes on the host now: a PID of the frozen list that ended may already belong to another
        # process elsewhere (PIDs wrap around at 32,768 here, and a test suite's threads take them fast)
        return all(state(pid) in ("T", "Z", "gone") for pid in c.pids(1))

    deadline = time.monotonic() + 10
    while not stopped():  # the signal is delivered asynchronously
        assert time.monotonic() < deadline, "not stopped"
        time.sleep(0.05)  # polling the process state, against a deadline
    assert sleeper[0] in frozen and state(sleeper[0]) == "T"
    c.thaw(1)
    c.kill(1)
    assert p.wait(10) != 0


def test_a_failed_build_and_a_dead_test_leave_no_namespace(tmp_path):
    from .conftest import _why_not
    from .harness import sweep_stale

    if _why_not():
        pytest.skip(_why_not())
    c = Cluster(tmp_path / "c", 2, rate="fast")  # not a rate: up() fails after making the hosts
    with pytest.raises(ValueError, match="rate 'fast'"):
        c.up()
    dead = "gsc999999999x0h0"  # as left by a test process (PID 999999999: none) killed before its teardown
    subprocess.run(["ip", "netns", "add", dead], check=True)
    sweep_stale()
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    assert not [n for n in left if n.startswith(c.prefix) or n == dead], left


_TERMINATED = """
import sys, time
sys.path.insert(0, sys.argv[2])
from tests.cluster.harness import Cluster, down_on_sigterm
down_on_sigterm()
c = Cluster(__import__("pathlib").Path(sys.argv[1]), 1).up()
try:
    print(c.prefix, flush=True)
    time.sleep(120)
finally:
    c.down()
"""


def test_a_terminated_script_takes_its_hosts_down(tmp_path):
    """A script that builds hosts (a benchmark) and calls ``down_on_sigterm`` removes them when terminated."""
    from pathlib import Path

    from .conftest import _why_not

    if _why_not():
        pytest.skip(_why_not())
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([PY, "-c", _TERMINATED, str(tmp_path / "c"), str(root)], stdout=subprocess.PIPE, text=True)
    try:
        prefix = proc.stdout.readline().strip()  # once the host is up
        assert prefix.startswith("gsc"), prefix
        assert any(n.startswith(prefix) for n in _namespaces())
        proc.terminate()
        assert proc.wait(30) == 143
    finally:
        proc.kill()
        proc.wait(30)
    assert not [n for n in _namespaces() if n.startswith(prefix)]


def _namespaces() -> list[str]:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()


def test_a_listed_pid_that_is_now_another_process_elsewhere_is_not_signalled(cluster, monkeypatch):
    c = cluster(2)
    elsewhere = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"])  # on this machine, no host's
    try:
        monkeypatch.setattr(c, "pids", lambda i: [elsewhere.pid])  # as if a listed PID had been taken by it
        assert c.kill(1) == [] and c.freeze(1) == []
        assert elsewhere.poll() is None and state(elsewhere.pid) in ("S", "R")  # still running, never stopped
    finally:
        elsewhere.kill()
        elsewhere.wait(10)

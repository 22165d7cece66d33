"""An emulated cluster for tests: N hosts on this machine, each a Linux network namespace.

The hosts are joined by a bridge that lives in a namespace of its own, so no packet can leave the
machine. Host ``i`` is named ``node<i>``, has one interface ``eth0`` with address ``198.18.0.<i+1>/24``
(RFC 2544's benchmarking range, used only inside these namespaces), its own working directory
``<root>/node<i>`` and its own core(s). Every command started on a host also gets a mount namespace of its
own, in which the other hosts' working directories are covered by empty read-only file systems (a host
sees only its own files, as without NFS), ``/etc/hosts`` names every host, and the host name is its own.

A link can be capped (``tc`` token bucket on both ends: this kernel has no ``netem``, so no latency is
added), cut and healed. Behind a capped link's token bucket waits the queue a host's network card would have:
by default the kernel's own (``net.core.default_qdisc``, e.g. ``pfifo_fast``, which sends packets of a higher
socket priority first, or ``fq_codel``), or ``queue="fifo"``: one first-in first-out queue of at most 100 ms
(the token bucket's own, as a congested router's). A host's processes can be frozen, thawed or killed.
:meth:`Cluster.down` removes everything it made, and is called on every path by the ``cluster`` fixture
(tests/cluster/conftest.py); namespaces left by a test process that was itself killed are swept by the next
one.

Needs root, ``ip`` and ``tc`` (iproute2), ``unshare`` and ``taskset`` (util-linux):
:func:`unavailable` says in one line what is missing.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SUBNET = "198.18.0"
_COUNTER = itertools.count()
_TOOLS = ("ip", "tc", "unshare", "taskset", "mount")


def _namespace(path: str) -> tuple[int, int]:
    """The identity of the namespace file at ``path`` (its device and inode)."""
    st = os.stat(path)
    return st.st_dev, st.st_ino


def unavailable() -> str | None:
    """Why an emulated cluster cannot be built here (one line), or None."""
    if os.geteuid() != 0:
        return "emulated hosts need root (network namespaces)"
    missing = [t for t in _TOOLS if shutil.which(t) is None]
    if missing:
        return f"emulated hosts need {', '.join(missing)} (iproute2, util-linux)"
    probe = f"gsprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot create network namespaces here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.strip()}")
    return done


def _burst(rate: str) -> int:
    """Bytes a token bucket may send at once: 1 ms at ``rate`` (e.g. ``1gbit``), at least 64 KiB."""
    m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", rate.lower())
    if not m:
        raise ValueError(f"rate {rate!r}: expected e.g. 100mbit, 1gbit")
    bits = float(m[1]) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m[2]]
    return max(65536, int(bits / 8 / 1000))


def link_queue(queue: str) -> str:
    """The queue behind a capped link's token bucket that ``queue`` names: a qdisc's name (``host``: the kernel's
    default, ``net.core.default_qdisc``), or ``fifo`` (the bucket's own)."""
    if queue != "host":
        return queue
    return Path("/proc/sys/net/core/default_qdisc").read_text().strip()


@dataclass
class Host:
    index: int
    name: str  # node<i>: its host name, and the name the other hosts know it by
    address: str
    netns: str
    workdir: Path
    cores: str  # taskset's list, e.g. "0" or "0,1"


@dataclass
class Proc:
    """A command started on a host: its process (``ip netns exec`` ... the command itself) and its output."""

    host: Host
    popen: subprocess.Popen
    log: Path

    def wait(self, timeout: float) -> int:
        """The exit code; raises ``AssertionError`` with the output's tail if it runs longer than ``timeout``."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.host.name}: still running after {timeout} s:\n{self.tail()}") from None

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.output().splitlines()[-lines:])


@dataclass
class Cluster:
    """``n`` emulated hosts under ``root`` (see the module). Use :meth:`up` / :meth:`down`, or the fixture."""

    root: Path
    n: int
    rate: str | None = None
    cores_per_host: int = 1
    queue: str = "host"  # behind a capped link: "host" (the kernel's default queue), "fifo", or a qdisc's name
    prefix: str = field(default_factory=lambda: f"gsc{os.getpid()}x{next(_COUNTER)}")
    hosts: list[Host] = field(default_factory=list)
    procs: list[Proc] = field(default_factory=list)

    @property
    def switch(self) -> str:
        return f"{self.prefix}sw"

    def up(self) -> Cluster:
        sweep_stale()
        cores = os.cpu_count() or 1
        self.root.mkdir(parents=True, exist_ok=True)
        _sh("ip", "netns", "add", self.switch)
        try:
            self._in(self.switch, "ip", "link", "set", "lo", "up")
            self._in(self.switch, "ip", "link", "add", "br0", "type", "bridge")
            self._in(self.switch, "ip", "link", "set", "br0", "up")
            for i in range(self.n):
                self.hosts.append(self._add_host(i, cores))
            (self.root / "hosts").write_text(
                "127.0.0.1 localhost\n" + "".join(f"{h.address} {h.name}\n" for h in self.hosts)
            )
            if self.rate:
                self.shape(self.rate)
        except BaseException:
            self.down()
            raise
        return self

    def _add_host(self, i: int, cores: int) -> Host:
        ns, port = f"{self.prefix}h{i}", f"{self.prefix}v{i}"
        host = Host(
            i,
            f"node{i}",
            f"{SUBNET}.{i + 1}",
            ns,
            self.root / f"node{i}",
            ",".join(str((i * self.cores_per_host + c) % cores) for c in range(self.cores_per_host)),
        )
        _sh("ip", "netns", "add", ns)
        _sh("ip", "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _sh("ip", "link", "set", port, "netns", self.switch)
        self._in(self.switch, "ip", "link", "set", port, "master", "br0", "up")
        self._in(ns, "ip", "addr", "add", f"{host.address}/24", "dev", "eth0")
        self._in(ns, "ip", "link", "set", "eth0", "up")
        self._in(ns, "ip", "link", "set", "lo", "up")
        host.workdir.mkdir(parents=True, exist_ok=True)
        return host

    @staticmethod
    def _in(ns: str, *argv: str) -> subprocess.CompletedProcess:
        return _sh("ip", "netns", "exec", ns, *argv)

    # -- running ---------------------------------------------------------------------------------
    def run(self, i: int, argv: list[str], env: dict[str, str] | None = None, name: str = "cmd") -> Proc:
        """Start ``argv`` on host ``i`` in its working directory (see the module), output to a log file."""
        host = self.hosts[i]
        hide = "".join(f"mount -t tmpfs -o ro,size=4k gs-hidden {h.workdir} && " for h in self.hosts if h is not host)
        setup = (
            f"hostname {host.name} && mount --bind {self.root / 'hosts'} /etc/hosts && {hide}"
            f'cd {host.workdir} && exec taskset -c {host.cores} "$@"'
        )
        log = self.root / f"{host.name}-{name}-{len(self.procs)}.log"
        with open(log, "wb") as out:
            popen = subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    host.netns,
                    "unshare",
                    "--mount",
                    "--uts",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    setup,
                    "sh",
                    *argv,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
        proc = Proc(host, popen, log)
        self.procs.append(proc)
        return proc

    def pids(self, i: int) -> list[int]:
        """Every process running on host ``i``."""
        done = _sh("ip", "netns", "pids", self.hosts[i].netns, check=False)
        return [int(p) for p in done.stdout.split()]

    def signal(self, i: int, sig: int, match: str | None = None) -> list[int]:
        """Send ``sig`` to host ``i``'s processes (those whose command line contains ``match``); their PIDs.
        Each is signalled through a process handle (pidfd) taken once it is seen to be still on the host: a
        listed process that ends, its PID taken by another process elsewhere (PIDs wrap), is never signalled."""
        on_host = _namespace(f"/run/netns/{self.hosts[i].netns}")
        hit = []
        for pid in self.pids(i):
            try:
                handle = os.pidfd_open(pid)
            except OSError:  # ended
                continue
            try:
                if _namespace(f"/proc/{pid}/ns/net") != on_host:
                    continue
                if match is None or match in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode():
                    signal.pidfd_send_signal(handle, sig)
                    hit.append(pid)
            except (OSError, ValueError):  # ended meanwhile
                pass
            finally:
                os.close(handle)
        return hit

    def freeze(self, i: int) -> list[int]:
        """Stop every process of host ``i`` (SIGSTOP): a hung machine."""
        return self.signal(i, signal.SIGSTOP)

    def thaw(self, i: int) -> list[int]:
        return self.signal(i, signal.SIGCONT)

    def kill(self, i: int, match: str | None = None) -> list[int]:
        return self.signal(i, signal.SIGKILL, match)

    # -- the network -----------------------------------------------------------------------------
    def cut(self, i: int) -> None:
        """Take host ``i``'s link down (a network partition; its processes go on)."""
        self._in(self.hosts[i].netns, "ip", "link", "set", "eth0", "down")

    def heal(self, i: int) -> None:
        self._in(self.hosts[i].netns, "ip", "link", "set", "eth0", "up")

    def shape(self, rate: str | None) -> None:
        """Cap every host's link at ``rate`` each way (``None``: unshaped)."""
        queue = self.link_queue
        for h in self.hosts:
            port = f"{self.prefix}v{h.index}"
            for ns, dev in ((h.netns, "eth0"), (self.switch, port)):
                _sh("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root", check=False)
                if rate:
                    self._in(
                        ns,
                        "tc",
                        "qdisc",
                        "add",
                        "dev",
                        dev,
                        "root",
                        "handle",
                        "1:",
                        "tbf",
                        "rate",
                        rate,
                        "burst",
                        str(_burst(rate)),
                        "latency",
                        "100ms",
                    )
                    if queue != "fifo":
                        self._in(ns, "tc", "qdisc", "add", "dev", dev, "parent", "1:1", queue)
        self.rate = rate

    @property
    def link_queue(self) -> str:
        return link_queue(self.queue)

    # -- teardown --------------------------------------------------------------------------------
    def down(self) -> None:
        """Kill every process on the hosts and remove the namespaces (safe to call more than once)."""
        for proc in self.procs:
            _kill_group(proc.popen)
        for h in self.hosts:
            self.signal(h.index, signal.SIGCONT)
            self.kill(h.index)
        for proc in self.procs:
            try:
                proc.popen.wait(10)
            except subprocess.TimeoutExpired:
                pass
        _remove_namespaces(self.prefix)
        self.hosts.clear()


def _kill_group(popen: subprocess.Popen) -> None:
    try:
        os.killpg(popen.pid, signal.SIGCONT)
        os.killpg(popen.pid, signal.SIGKILL)
    except OSError:
        pass


def _remove_namespaces(prefix: str) -> None:
    names = _sh("ip", "netns", "list", check=False).stdout.split()
    for ns in names:
        if re.fullmatch(rf"{re.escape(prefix)}(h\d+|sw)", ns):
            for pid in _sh("ip", "netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
            deadline = time.monotonic() + 5
            while _sh("ip", "netns", "pids", ns, check=False).stdout.split() and time.monotonic() < deadline:
                time.sleep(0.05)  # polling for the killed processes to be reaped, against a deadline
            _sh("ip", "netns", "del", ns, check=False)


def sweep_stale() -> None:
    """Remove the namespaces of test processes that no longer exist (killed before their teardown)."""
    names = _sh("ip", "netns", "list", check=False).stdout.split()
    for pid in {int(m[1]) for ns in names if (m := re.fullmatch(r"gsc(\d+)x\d+(?:h\d+|sw)", ns))}:
        if not Path(f"/proc/{pid}").exists():
            for k in {m[1] for ns in names if (m := re.fullmatch(rf"gsc{pid}x(\d+)(?:h\d+|sw)", ns))}:
                _remove_namespaces(f"gsc{pid}x{k}")


def down_on_sigterm() -> None:
    """Make SIGTERM end this process by raising :class:`SystemExit` (143), so that every ``finally`` (each
    cluster's :meth:`Cluster.down`) runs, as on Ctrl-C: for a script that sets up clusters (a benchmark)."""

    def _exit(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)

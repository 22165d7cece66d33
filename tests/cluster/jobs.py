"""graphshard jobs on the emulated cluster: partitions copied to the hosts that serve them (nothing else is
shared), and ranks started the way each launcher starts them: ``torchrun`` on every host, the plain
environment of a Kubernetes PyTorchJob (one process per rank, no agent), or Slurm's ``srun`` environment."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .harness import Cluster, Proc

PY = sys.executable
PORT = "29511"  # every emulated host has a network namespace, and so ports, of its own
LAUNCHERS = ("torchrun", "env", "slurm")
VICTIM = str(Path(__file__).with_name("victim.py"))
LOST_LINE = re.compile(r"graphshard: error: (lost rank 1 on host \S+: .*)")
# variables of an outer launcher that must not leak into the emulated hosts' ranks
_OUTER = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "GLOO_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME",
    "GRAPHSHARD_STORE_HOSTED",
    "GRAPHSHARD_SECRET",
    "GRAPHSHARD_SECRET_FILE",
    "GRAPHSHARD_INSECURE",
)


# every job's processes share a secret, as a cluster's would be given one (the ranks listen beyond loopback)
JOB_SECRET = secrets.token_hex(16)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _OUTER and not k.startswith("SLURM_")}
    return env | {"PYTHONUNBUFFERED": "1", "GRAPHSHARD_SECRET": JOB_SECRET} | extra


def spread(config: Path, c: Cluster, parts_of: list[list[int]], sub: str = "parts", also: tuple[Path, ...] = ()) -> str:
    """Copy the partition config (and the files ``also``) to every host and each host's partitions
    (``parts_of[i]`` for host ``i``) beside it, in ``<workdir>/<sub>``; returns the config's path relative
    to each workdir."""
    raw = json.loads(config.read_text())
    for host, parts in zip(c.hosts, parts_of):
        dest = host.workdir / sub
        dest.mkdir(parents=True, exist_ok=True)
        for f in (config, *also):
            shutil.copy2(f, dest / f.name)
        for p in parts:
            for rel in raw[f"part-{p}"].values():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(config.parent / rel, dest / rel)
    return f"{sub}/{config.name}"


def start(
    c: Cluster,
    args: list[str],
    per_host: int = 1,
    how: str = "torchrun",
    hosts: int | None = None,
    name: str = "job",
    env: dict[str, str] | None = None,
    entry: list[str] | None = None,
    host_env: list[dict[str, str]] | None = None,
) -> list[Proc]:
    """Start ``graphshard ARGS`` on the first ``hosts`` hosts (all by default), ``per_host`` ranks each,
    as launcher ``how`` starts them; host 0 is the master. ``entry``: what torchrun runs instead of
    ``-m graphshard.cli`` (e.g. :mod:`tests.cluster.victim`); ``host_env``: more environment, host by host."""
    n = hosts or len(c.hosts)
    master, world = c.hosts[0], n * per_host
    procs = []
    for i in range(n):
        here = {**(env or {}), **(host_env[i] if host_env else {})}
        if how == "torchrun":
            argv = [
                PY,
                "-m",
                "torch.distributed.run",
                "--nnodes",
                str(n),
                "--nproc-per-node",
                str(per_host),
                "--node-rank",
                str(i),
                "--master-addr",
                master.address,
                "--master-port",
                PORT,
                *(entry or ["-m", "graphshard.cli"]),
                *args,
            ]
            procs.append(c.run(i, argv, clean_env(**here), name=f"{name}-torchrun"))
            continue
        for local in range(per_host):
            rank = i * per_host + local
            if how == "env":  # what a PyTorchJob's operator sets on every pod
                ranks = {
                    "MASTER_ADDR": master.name,
                    "MASTER_PORT": PORT,
                    "RANK": str(rank),
                    "WORLD_SIZE": str(world),
                    "LOCAL_RANK": str(local),
                }
            elif how == "slurm":  # what srun sets on every task of `srun --nodes N --ntasks-per-node T`
                ranks = {
                    "SLURM_PROCID": str(rank),
                    "SLURM_NTASKS": str(world),
                    "SLURM_LOCALID": str(local),
                    "SLURM_NODEID": str(i),
                    "SLURM_JOB_NODELIST": f"node[0-{n - 1}]",
                    "SLURM_TASKS_PER_NODE": f"{per_host}(x{n})",
                    "SLURM_JOB_ID": "4242",
                }
            else:
                raise ValueError(f"launcher {how!r}: one of {LAUNCHERS}")
            procs.append(
                c.run(i, [PY, "-m", "graphshard.cli", *args], clean_env(**ranks, **here), name=f"{name}-rank{rank}")
            )
    return procs


def finish(procs: list[Proc], timeout: float = 240) -> None:
    """Wait for every process; fail with every host's output tail if one failed."""
    codes = [p.wait(timeout) for p in procs]
    if any(codes):
        raise AssertionError(
            "\n\n".join(f"--- {p.host.name} (exit {code}):\n{p.tail(40)}" for p, code in zip(procs, codes))
        )


def faulted(c: Cluster, args: list[str], kind: str, at: str, timeout: float = 180) -> tuple[float, str, str]:
    """Run ``graphshard ARGS`` on every host, one rank each, and fault host 1's rank (``kind``: cut, stop,
    kill; see :mod:`tests.cluster.victim`) when it reaches phase ``at``; wait for the hosts to stop.
    Returns the seconds from the fault to host 0's line naming the lost rank, that line, and host 0's output."""
    mark = c.root / "fault.mark"
    mark.unlink(missing_ok=True)
    procs = start(
        c,
        args,
        entry=[VICTIM],
        name=f"fault-{kind}",
        env={"GS_FAULT": kind, "GS_FAULT_AT": at, "GS_FAULT_RANK": "1", "GS_FAULT_MARK": str(mark)},
    )
    survivor, deadline, found = procs[0], time.monotonic() + timeout, None
    while found is None:  # polling the survivor's output for its line, against a deadline
        assert time.monotonic() < deadline, f"no fault or no line:\n{survivor.tail()}"
        assert survivor.popen.poll() is None or LOST_LINE.search(survivor.output()), survivor.tail()
        found = LOST_LINE.search(survivor.output()) if mark.exists() else None
        seen = time.time()
        time.sleep(0.05)
    struck = float(mark.read_text().split()[0])
    assert survivor.wait(30) != 0
    if kind == "stop":
        c.kill(1)  # a frozen host never ends by itself
    for p in procs[1:]:
        p.wait(30)
    return seen - struck, found.group(1), survivor.output()


STRANGER = str(Path(__file__).with_name("stranger.py"))


def listening(netns: str, skip: tuple[int, ...] = ()) -> list[tuple[int, str]]:
    """The (port, protocol) of every socket listening in ``netns``, but the rendezvous store's and ``skip``."""
    out = []
    for proto, flag in (("tcp", "-Hltn"), ("udp", "-Hlun")):
        lines = subprocess.run(["ip", "netns", "exec", netns, "ss", flag], capture_output=True, text=True).stdout
        for line in lines.splitlines():
            port = int(line.split()[3].rpartition(":")[2])
            if str(port) != PORT and port not in skip:
                out.append((port, proto))
    return out


def probe(c: Cluster, stranger: int, hosts: list[int], pwned: Path, skip: tuple[int, ...] = ()) -> list[dict]:
    """Run :mod:`tests.cluster.stranger` on host ``stranger`` against every socket listening on ``hosts`` (but
    ``skip``); its report per socket."""
    targets = [[c.hosts[i].address, port, proto] for i in hosts for port, proto in listening(c.hosts[i].netns, skip)]
    assert sum(1 for *_, proto in targets if proto == "tcp") >= 2 * len(hosts)  # channels and gloo of each rank
    run = c.run(stranger, [PY, STRANGER, json.dumps(targets), str(pwned)], clean_env(), name="stranger")
    assert run.wait(120) == 0, run.tail()
    reports = [json.loads(ln) for ln in run.output().splitlines() if ln.startswith("{")]
    assert len(reports) == len(targets), run.tail()
    return reports

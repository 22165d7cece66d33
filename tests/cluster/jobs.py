"""graphshard jobs on the emulated cluster: partitions copied to the hosts that serve them (nothing else is
shared), and ranks started the way each launcher starts them: ``torchrun`` on every host, the plain
environment of a Kubernetes PyTorchJob (one process per rank, no agent), or Slurm's ``srun`` environment."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from .harness import Cluster, Proc

PY = sys.executable
PORT = "29511"  # every emulated host has a network namespace, and so ports, of its own
LAUNCHERS = ("torchrun", "env", "slurm")
# variables of an outer launcher that must not leak into the emulated hosts' ranks
_OUTER = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
          "TORCHELASTIC_RUN_ID", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "GRAPHSHARD_STORE_HOSTED")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _OUTER and not k.startswith("SLURM_")}
    return env | {"PYTHONUNBUFFERED": "1"} | extra


def spread(config: Path, c: Cluster, parts_of: list[list[int]], sub: str = "parts",
           also: tuple[Path, ...] = ()) -> str:
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


def start(c: Cluster, args: list[str], per_host: int = 1, how: str = "torchrun", hosts: int | None = None,
          name: str = "job", env: dict[str, str] | None = None, entry: list[str] | None = None) -> list[Proc]:
    """Start ``graphshard ARGS`` on the first ``hosts`` hosts (all by default), ``per_host`` ranks each,
    as launcher ``how`` starts them; host 0 is the master. ``entry``: what torchrun runs instead of
    ``-m graphshard.cli`` (e.g. :mod:`tests.cluster.victim`)."""
    n = hosts or len(c.hosts)
    master, world = c.hosts[0], n * per_host
    procs = []
    for i in range(n):
        if how == "torchrun":
            argv = [PY, "-m", "torch.distributed.run", "--nnodes", str(n), "--nproc-per-node", str(per_host),
                    "--node-rank", str(i), "--master-addr", master.address, "--master-port", PORT,
                    *(entry or ["-m", "graphshard.cli"]), *args]
            procs.append(c.run(i, argv, clean_env(**(env or {})), name=f"{name}-torchrun"))
            continue
        for local in range(per_host):
            rank = i * per_host + local
            if how == "env":  # what a PyTorchJob's operator sets on every pod
                ranks = {"MASTER_ADDR": master.name, "MASTER_PORT": PORT, "RANK": str(rank), "WORLD_SIZE": str(world),
                         "LOCAL_RANK": str(local)}
            elif how == "slurm":  # what srun sets on every task of `srun --nodes N --ntasks-per-node T`
                ranks = {"SLURM_PROCID": str(rank), "SLURM_NTASKS": str(world), "SLURM_LOCALID": str(local),
                         "SLURM_NODEID": str(i), "SLURM_JOB_NODELIST": f"node[0-{n - 1}]",
                         "SLURM_TASKS_PER_NODE": f"{per_host}(x{n})", "SLURM_JOB_ID": "4242"}
            else:
                raise ValueError(f"launcher {how!r}: one of {LAUNCHERS}")
            procs.append(c.run(i, [PY, "-m", "graphshard.cli", *args], clean_env(**ranks, **(env or {})),
                               name=f"{name}-rank{rank}"))
    return procs


def finish(procs: list[Proc], timeout: float = 240) -> None:
    """Wait for every process; fail with every host's output tail if one failed."""
    codes = [p.wait(timeout) for p in procs]
    if any(codes):
        raise AssertionError("\n\n".join(f"--- {p.host.name} (exit {code}):\n{p.tail(40)}"
                                         for p, code in zip(procs, codes)))

"""Who this rank is, whatever started it: ``torchrun``, the plain environment a Kubernetes PyTorchJob sets
(``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, no agent), or Slurm's ``srun``.

Everything downstream reads torchrun's names. Under ``srun`` (``SLURM_PROCID`` set, ``RANK`` not),
:func:`adopt_launcher_env` fills them in from Slurm's: ``RANK`` from ``SLURM_PROCID``, ``WORLD_SIZE`` from
``SLURM_NTASKS``, ``LOCAL_RANK`` from ``SLURM_LOCALID``, ``GROUP_RANK`` from ``SLURM_NODEID``,
``LOCAL_WORLD_SIZE`` from ``SLURM_TASKS_PER_NODE`` (a count per node, such as ``2(x3),1``) or else from
``SLURM_NTASKS_PER_NODE`` (``--ntasks-per-node``: one count for every node); ``MASTER_ADDR`` stays as
given, else the first host of ``SLURM_JOB_NODELIST``; ``MASTER_PORT`` stays as given, else one derived from
``SLURM_JOB_ID`` (the same on every task of the job).
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping

from ...errors import DistError

# ports derived from a Slurm job ID fall in [BASE, BASE + SPAN): above the usual services, below the
# ephemeral range Linux hands out by default (32768 and up)
SLURM_PORT_BASE, SLURM_PORT_SPAN = 20000, 10000


def launcher(env: MutableMapping[str, str] | None = None) -> str:
    """Which launcher's environment this process has: ``torchrun``, ``env`` (RANK and the rest set by
    hand or by a PyTorchJob), ``slurm``, or ``none``."""
    env = os.environ if env is None else env
    if "RANK" in env:
        return "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
    if "SLURM_PROCID" in env and ("SLURM_NTASKS" in env or "SLURM_NPROCS" in env):
        return "slurm"
    return "none"


def adopt_launcher_env(env: MutableMapping[str, str] | None = None) -> str:
    """Fill in torchrun's variable names from Slurm's when this is an ``srun`` task (see the module);
    returns :func:`launcher`'s answer. Raises :class:`DistError` naming the Slurm variable that is missing
    or malformed."""
    env = os.environ if env is None else env
    kind = launcher(env)
    if kind != "slurm":
        return kind
    ntasks = env.get("SLURM_NTASKS") or env.get("SLURM_NPROCS")
    node = _slurm_int(env, "SLURM_NODEID", default="0")
    values = {
        "RANK": str(_slurm_int(env, "SLURM_PROCID")),
        "WORLD_SIZE": str(_number("SLURM_NTASKS", ntasks)),
        "LOCAL_RANK": str(_slurm_int(env, "SLURM_LOCALID", default="0")),
        "GROUP_RANK": str(node),
    }
    per_node = env.get("SLURM_TASKS_PER_NODE")
    if per_node:
        counts = tasks_per_node(per_node)
        if node >= len(counts):
            raise DistError(f"SLURM_TASKS_PER_NODE={per_node!r} lists {len(counts)} nodes; SLURM_NODEID is {node}")
        values["LOCAL_WORLD_SIZE"] = str(counts[node])
    elif env.get("SLURM_NTASKS_PER_NODE"):  # one count for every node, not a list
        values["LOCAL_WORLD_SIZE"] = str(_number("SLURM_NTASKS_PER_NODE", env["SLURM_NTASKS_PER_NODE"]))
    if "MASTER_ADDR" not in env:
        nodes = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
        if not nodes:
            raise DistError("under srun, set MASTER_ADDR or SLURM_JOB_NODELIST (the first host is the master)")
        values["MASTER_ADDR"] = first_host(nodes)
    if "MASTER_PORT" not in env:
        job = _slurm_int(env, "SLURM_JOB_ID", default=env.get("SLURM_JOBID"))
        values["MASTER_PORT"] = str(SLURM_PORT_BASE + job % SLURM_PORT_SPAN)
    env.update(values)
    return kind


def _number(name: str, text: str | None) -> int:
    if text is None or not re.fullmatch(r"\d+", text.strip()):
        raise DistError(
            f"environment variable {name} is {'not set' if text is None else repr(text)}: "
            "expected a non-negative integer"
        )
    return int(text)


def _slurm_int(env: MutableMapping[str, str], name: str, default: str | None = None) -> int:
    return _number(name, env.get(name, default))


def first_host(nodelist: str) -> str:
    """The first host of a Slurm host list such as ``node[07-09,12],gpu1`` (``node07``), padding kept."""
    item = re.split(r",(?![^\[]*\])", nodelist.strip(), maxsplit=1)[0]
    if not item or item.count("[") != item.count("]"):
        raise DistError(f"SLURM_JOB_NODELIST {nodelist!r} is not a Slurm host list")
    return re.sub(r"\[([^\]]*)\]", lambda m: m.group(1).split(",")[0].split("-")[0], item)


def tasks_per_node(text: str) -> list[int]:
    """Slurm's compressed per-node task counts, e.g. ``2(x3),1`` -> ``[2, 2, 2, 1]``."""
    counts = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not m:
            raise DistError(f"SLURM_TASKS_PER_NODE {text!r} is not a list such as 2(x3),1")
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts

"""The launcher's warm-up compiles every kernel of the runtime's packages, so no rank compiles one itself
(checked in a fresh process: compiled signatures live per process, the machine code in the disk cache)."""

from __future__ import annotations

import json
import subprocess
import sys

# every module of the packages whose code runs in ranks, and every (non-inlined) numba kernel in them, with the
# number of signatures this process has for it after the warm-up
PROBE = """
import importlib, json, pkgutil
import graphshard
from numba.core.registry import CPUDispatcher
from graphshard.tasks.compiled import warm_up

names = ["graphshard.ranges"]
for package in ("sampling", "distributed", "models", "infer"):
    pkg = importlib.import_module(f"graphshard.{package}")
    names += [pkg.__name__] + [m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
modules = [importlib.import_module(n) for n in names]
warm_up()
found = {
    f"{m.__name__}.{k}": len(v.signatures)
    for m in modules
    for k, v in vars(m).items()
    if isinstance(v, CPUDispatcher) and v.__module__ == m.__name__ and v.targetoptions.get("inline") != "always"
}
print(json.dumps(found))
"""


def test_warm_up_compiles_every_kernel_ranks_run():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert {"graphshard.sampling.kernels.neighbour_ids", "graphshard.distributed.stores.rows._gather"} <= set(found)
    assert {"graphshard.models.dropout._forward", "graphshard.ranges._count_at_or_below"} <= set(found)
    assert [k for k, n in found.items() if n == 0] == []

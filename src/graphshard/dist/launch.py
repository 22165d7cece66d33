"""Start a local cluster: ``num_procs`` ranks on loopback (or a given address) with a free port.

The parent hosts the rendezvous store (bound to port 0, so the port is free by construction) and
spawns the ranks; if one rank fails, the others are terminated and :class:`DistError` names the rank.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable
from typing import Any

from .context import DistError


def _entry(index: int, fn: Callable[..., Any], args: tuple, host: str, port: int, world: int) -> None:
    os.environ.update({"RANK": str(index), "WORLD_SIZE": str(world), "LOCAL_RANK": str(index),
                       "MASTER_ADDR": host, "MASTER_PORT": str(port), "GRAPHSHARD_STORE_HOSTED": "1"})
    fn(*args)


def launch(fn: Callable[..., Any], num_procs: int, args: tuple = (), host: str = "127.0.0.1",
           timeout: float = 300.0) -> None:
    """Run ``fn(*args)`` in ``num_procs`` spawned processes that see torchrun-style environment
    variables (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``)."""
    import torch.distributed as dist
    import torch.multiprocessing as mp

    if num_procs < 1:
        raise DistError(f"num_procs must be >= 1, got {num_procs}")
    store = dist.TCPStore(host, 0, num_procs, is_master=True, timeout=datetime.timedelta(seconds=timeout),
                          wait_for_workers=False)
    try:
        mp.start_processes(_entry, args=(fn, args, host, store.port, num_procs), nprocs=num_procs,
                           join=True, start_method="spawn")
    except mp.ProcessRaisedException as exc:
        raise DistError(f"rank {exc.error_index} failed:\n{exc}") from None
    except mp.ProcessExitedException as exc:
        raise DistError(f"rank {exc.error_index} exited with code {exc.exit_code}") from None
    finally:
        del store

"""One call to join a distributed run: process group (gloo) plus RPC, torn down in the right order."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..groups.rpc import RpcGroup, init_rpc, shutdown_rpc
from ..host.lifetime import refuse_spawn_reimport
from ..host.threads import apply_thread_budget
from ..ranks.context import DistContext


@dataclass(frozen=True)
class Session:
    ctx: DistContext
    group: RpcGroup

    @property
    def rank(self) -> int:
        return self.ctx.rank

    @property
    def world_size(self) -> int:
        return self.ctx.world_size


@contextmanager
def session(
    timeout: float = 300.0, rpc_host: str = "127.0.0.1", heartbeat_timeout: float | None = None
) -> Iterator[Session]:
    """Join the run described by torchrun-style environment variables (as set by ``torchrun``,
    :func:`graphshard.distributed.ranks.launcher.launch`, a PyTorchJob, or Slurm's under ``srun``). On an error this
    rank records it for the others and leaves RPC without waiting for them; otherwise it leaves together with
    every rank. ``heartbeat_timeout``: see :meth:`DistContext.from_env`."""
    refuse_spawn_reimport()
    apply_thread_budget()
    with DistContext.from_env(timeout=timeout, heartbeat_timeout=heartbeat_timeout) as ctx:
        group = init_rpc(ctx, rpc_host)
        ok = False
        try:
            yield Session(ctx, group)
            ok = True
        finally:
            shutdown_rpc(group, graceful=ok)

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
    """One rank's membership of a distributed run, as `session` yields it.

    Attributes:
        ctx: the rank's process context (rank, world size, store, heartbeat).
        group: the RPC group of the run's ranks: what `DistGraph`, `DistTensor` and the loaders talk
            through.
    """

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
    """Join the run described by torchrun-style environment variables; a context manager.

    The variables are set by ``torchrun``, `launch`, a PyTorchJob, or Slurm's under ``srun``. On an error
    this rank records it for the others and leaves RPC without waiting for them; otherwise it leaves
    together with every rank.

    Args:
        timeout: seconds a collective, an RPC request or a barrier may wait.
        rpc_host: the address this host's own address is found from when ``MASTER_ADDR`` is not set (the
            RPC channels listen on this host's address on the run's network).
        heartbeat_timeout: seconds of silence after which a peer is lost (see `DistContext.from_env`; None:
            ``GRAPHSHARD_HEARTBEAT_TIMEOUT`` or the default; 0: off).

    Yields:
        The rank's `Session`: its context and RPC group.

    Raises:
        DistError: the environment does not describe a run (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` or
            ``MASTER_PORT`` is not set).
    """
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

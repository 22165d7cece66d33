"""``torch.distributed.rpc`` (TensorPipe) on top of a :class:`DistContext`, with bounded waits.

Rank 0 picks a free port and publishes it through the context's store; every rank then joins RPC
there. Remote calls go to module-level functions that look up process-local state in a registry.
"""

from __future__ import annotations

import socket
from typing import Any

from .context import DistContext, DistError

_REGISTRY: dict[str, Any] = {}
_PORT_KEY = "rpc/port"


def worker_name(rank: int) -> str:
    return f"graphshard-{rank}"


def register(name: str, obj: Any) -> None:
    """Make ``obj`` reachable by RPC handlers of this process under ``name``."""
    _REGISTRY[name] = obj


def registered(name: str) -> Any:
    if name not in _REGISTRY:
        raise DistError(f"nothing registered under {name!r} in this process")
    return _REGISTRY[name]


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def init_rpc(ctx: DistContext, host: str = "127.0.0.1", num_threads: int = 8) -> None:
    """Join RPC for this context's ranks; every call and the shutdown are bounded by ``ctx.timeout``."""
    import torch.distributed.rpc as rpc

    if ctx.rank == 0:
        ctx.store.set(_PORT_KEY, str(_free_port(host)))
    port = int(ctx.store.get(_PORT_KEY))
    opts = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://{host}:{port}", rpc_timeout=ctx.timeout,
                                           num_worker_threads=num_threads)
    rpc.init_rpc(worker_name(ctx.rank), rank=ctx.rank, world_size=ctx.world_size, rpc_backend_options=opts)


def shutdown_rpc(ctx: DistContext) -> None:
    import torch.distributed.rpc as rpc

    rpc.shutdown(graceful=True, timeout=ctx.timeout)

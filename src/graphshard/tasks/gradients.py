"""How a run's ranks sum their gradients: DDP over NCCL, in a process group of its own, where every rank has a
GPU of its own; otherwise DDP with a hook that sums on the host, over the ranks' direct channels (small
tensors) or gloo's all-reduce, and times it, so that ``comm_s`` (the sums, including waiting for slower ranks)
is measured apart from ``compute_s``. Ranks that share a GPU take the host's way (NCCL refuses two ranks on
one device): their gradients are copied to the host and back each step."""

from __future__ import annotations

import datetime
import itertools
import json
import logging
import time
from typing import Any

import torch
import torch.distributed as dist

from ..device.choice import RankDevice, nccl_for
from ..distributed.groups.reduce import ChannelSum, fits
from ..distributed.ranks.collectives import all_gather_bytes, barrier
from ..distributed.runtime.session import Session

notice = logging.getLogger("graphshard.notice")  # shown at the default log level
_TRAINERS = itertools.count()  # trainers made in this process (in the same order on every rank): their sums' keys


def distributed_model(
    s: Session, model: torch.nn.Module, where: RankDevice, comm: dict[str, Any], *, unused: bool, timeout: float
) -> torch.nn.Module:
    """DDP around ``model`` (on ``where``'s device) for session ``s`` (collective): over NCCL where every rank has
    a GPU of its own and NCCL, else summed on the host with ``comm`` as the hook's state (``comm_s``: seconds
    summing; ``sum``: the channels' sum, set here). ``unused``: some parameters
    may take no part in a step (DDP then looks for them)."""
    from torch.nn.parallel import DistributedDataParallel

    mine = json.dumps([where.identity(), dist.is_nccl_available()]).encode()
    told = [json.loads(b) for b in all_gather_bytes(s.ctx, mine, "gradient devices")]
    if nccl_for([t[0] for t in told], [t[1] for t in told]):  # every rank takes the same path
        group = dist.new_group(backend="nccl", timeout=datetime.timedelta(seconds=timeout))
        if s.rank == 0:
            notice.info("gradients summed over NCCL (every rank on a GPU of its own)")
        return DistributedDataParallel(
            model, device_ids=[where.device], process_group=group, find_unused_parameters=unused
        )
    # registered before the ranks meet (a collective): no rank sends its gradients before all can take them
    total = ChannelSum(s.group, f"gradients/{next(_TRAINERS)}")
    barrier(s.ctx, "gradient channels")
    comm["sum"] = total
    if s.rank == 0 and any(t[0] for t in told):
        notice.info("gradients summed on the host: ranks share a GPU, or NCCL is missing (NCCL takes one rank a GPU)")
    ddp = DistributedDataParallel(model, find_unused_parameters=unused)
    ddp.register_comm_hook(comm, _timed_allreduce)
    return ddp


def _timed_allreduce(state, bucket):  # no annotations: DDP checks them against its own types
    start = time.perf_counter()
    bucket_grads = bucket.buffer()
    # ranks sharing a GPU sum on the host (NCCL takes one rank per device): a copy there and back
    grads = bucket_grads.cpu().div_(dist.get_world_size())
    total = state["sum"]
    if total is not None and fits(total.group, grads.numel() * grads.element_size()):
        grads = total(grads)  # small: exchanged over the ranks' direct channels, not gloo's all-reduce
    else:
        dist.all_reduce(grads)
    if bucket_grads.device.type != "cpu":
        grads = bucket_grads.copy_(grads)
    state["comm_s"] += time.perf_counter() - start
    fut = torch.futures.Future()
    fut.set_result(grads)
    return fut

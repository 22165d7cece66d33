"""Collectives over gloo with timeouts and failure attribution (which rank broke the step)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from .context import PEER_FAILURE, DistContext, DistError
from .interrupt import raise_if_pending

T = TypeVar("T")


def guarded(ctx: DistContext, what: str, fn: Callable[[], T]) -> T:
    """Run a collective; on failure raise :class:`DistError` naming the failed peer if one reported."""
    try:
        return fn()
    except RuntimeError as exc:
        raise_if_pending()  # this rank was told to stop, so were its peers: that is why it failed
        deadline = time.monotonic() + 5.0
        peer = ctx.failed_peer()
        while peer is None and time.monotonic() < deadline:  # give a dying peer a moment to report
            time.sleep(0.1)
            peer = ctx.failed_peer()
        cause = (
            f"failed on {peer}" if peer else f"failed ({exc}); a peer rank died or timed out after {ctx.timeout:.0f} s"
        )
        raise DistError(f"rank {ctx.rank}: {PEER_FAILURE} {what} {cause}") from exc


def barrier(ctx: DistContext, what: str) -> None:
    import torch.distributed as dist

    guarded(ctx, f"barrier '{what}'", lambda: dist.barrier())


def all_reduce_sum(ctx: DistContext, arr: np.ndarray, what: str) -> np.ndarray:
    """Element-wise sum over ranks of an int64/float64 array."""
    import torch
    import torch.distributed as dist

    t = torch.from_numpy(np.ascontiguousarray(arr).copy())
    guarded(ctx, what, lambda: dist.all_reduce(t))
    return t.numpy()


def all_gather_bytes(ctx: DistContext, payload: bytes, what: str) -> list[bytes]:
    """Every rank's ``payload`` (any length), in rank order."""
    import torch
    import torch.distributed as dist

    size = torch.tensor([len(payload)], dtype=torch.int64)
    sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(ctx.world_size)]
    guarded(ctx, what, lambda: dist.all_gather(sizes, size))
    top = max(int(s) for s in sizes)
    buf = torch.zeros(top, dtype=torch.uint8)
    buf[: len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8) if payload else buf[:0]
    bufs = [torch.zeros(top, dtype=torch.uint8) for _ in range(ctx.world_size)]
    guarded(ctx, what, lambda: dist.all_gather(bufs, buf))
    return [bytes(b[: int(s)].numpy()) for b, s in zip(bufs, sizes)]


def exchange(ctx: DistContext, per_dest: list[np.ndarray], what: str) -> list[np.ndarray]:
    """All-to-all: ``per_dest[r]`` goes to rank ``r``; returns what each rank sent here, in rank order.

    Arrays must share dtype and trailing shape (rows are exchanged whole).
    """
    import torch
    import torch.distributed as dist

    first = per_dest[0]
    row_shape, dtype = first.shape[1:], first.dtype
    row_bytes = int(np.prod(row_shape, dtype=np.int64)) * dtype.itemsize
    send_rows = torch.tensor([a.shape[0] for a in per_dest], dtype=torch.int64)
    recv_rows = torch.empty_like(send_rows)
    guarded(ctx, f"{what} (sizes)", lambda: dist.all_to_all_single(recv_rows, send_rows))
    payload = (
        np.concatenate([np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in per_dest])
        if row_bytes
        else np.zeros(0, np.uint8)
    )
    send = torch.from_numpy(payload)
    recv = torch.empty(int(recv_rows.sum()) * row_bytes, dtype=torch.uint8)
    guarded(
        ctx,
        what,
        lambda: dist.all_to_all_single(recv, send, (recv_rows * row_bytes).tolist(), (send_rows * row_bytes).tolist()),
    )
    flat = recv.numpy().view(dtype)
    out, lo = [], 0
    for n in recv_rows.tolist():
        count = n * (row_bytes // dtype.itemsize)
        out.append(flat[lo : lo + count].reshape((n, *row_shape)))
        lo += count
    return out

"""Work split: which training nodes (edges) each rank processes.

Deterministic and vectorised: every rank computes the same split from the same mask and partition
book and keeps its piece. Ranks ``r`` belong to partition ``r // T`` when there are ``T = world / P``
ranks (trainers) per partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..book import RangePartitionBook
from ..errors import InputError
from ..graph import to_numpy

if TYPE_CHECKING:
    import torch


def node_split(
    mask: Any,
    book: RangePartitionBook,
    ntype: str | None = None,
    rank: int | None = None,
    world_size: int | None = None,
    force_even: bool = True,
) -> torch.Tensor:
    """IDs of the nodes selected by ``mask`` (boolean, one entry per node of ``ntype`` — homogeneous
    when None — in new-ID order) that rank ``rank`` of ``world_size`` should process.

    ``force_even=True``: sizes differ by at most one across ranks; each rank first takes nodes of its
    own partition (as many as its share allows), the rest are dealt to ranks short of their share.
    ``force_even=False``: each rank gets only its own partition's selected nodes, split evenly among
    that partition's trainers. Either way the pieces are disjoint and together cover the selection.
    Returned IDs are per-type new IDs of ``ntype`` (homogeneous IDs when None), ascending.
    """
    ids = np.flatnonzero(_bool_mask(mask, book.num_nodes(ntype), "node"))
    return _split(ids, to_numpy(book.nid2partid(ids, ntype)), book.num_partitions(), rank, world_size, force_even)


def edge_split(
    mask: Any,
    book: RangePartitionBook,
    etype: Any = None,
    rank: int | None = None,
    world_size: int | None = None,
    force_even: bool = True,
) -> torch.Tensor:
    """As :func:`node_split`, for edges (an edge belongs to its destination's partition)."""
    ids = np.flatnonzero(_bool_mask(mask, book.num_edges(etype), "edge"))
    return _split(ids, to_numpy(book.eid2partid(ids, etype)), book.num_partitions(), rank, world_size, force_even)


def _bool_mask(mask: Any, count: int, kind: str) -> np.ndarray:
    arr = to_numpy(mask)
    if arr.shape != (count,):
        raise InputError(f"{kind} mask must have one entry per {kind} ({count}), got shape {arr.shape}")
    return arr.astype(bool, copy=False)


def _rank_world(rank: int | None, world: int | None) -> tuple[int, int]:
    if rank is None or world is None:
        import torch.distributed as dist

        if not dist.is_initialized():
            raise InputError("pass rank and world_size, or call inside an initialised process group")
        rank, world = dist.get_rank(), dist.get_world_size()
    if not 0 <= rank < world:
        raise InputError(f"rank {rank} is outside [0, {world})")
    return rank, world


def _split(
    ids: np.ndarray, part: np.ndarray, num_parts: int, rank: int | None, world: int | None, force_even: bool
) -> torch.Tensor:
    import torch

    rank, world = _rank_world(rank, world)
    if world % num_parts:
        raise InputError(f"world size {world} must be a multiple of the number of partitions {num_parts}")
    trainers = world // num_parts
    # each rank's local candidates: its partition's selected IDs, cut evenly among the partition's trainers
    starts = np.searchsorted(part, np.arange(num_parts + 1))  # ids are ascending, so grouped by partition
    local_lo = np.empty(world, np.int64)
    local_hi = np.empty(world, np.int64)
    for r in range(world):  # loop over ranks, not items
        p, t = divmod(r, trainers)
        a, b = starts[p], starts[p + 1]
        local_lo[r], local_hi[r] = a + (b - a) * t // trainers, a + (b - a) * (t + 1) // trainers
    if not force_even:
        return torch.from_numpy(ids[local_lo[rank] : local_hi[rank]].copy())
    n = ids.shape[0]
    quota = np.array([n * (r + 1) // world - n * r // world for r in range(world)], dtype=np.int64)
    take = np.minimum(quota, local_hi - local_lo)
    taken = np.zeros(n, dtype=bool)
    for r in range(world):
        taken[local_lo[r] : local_lo[r] + take[r]] = True
    rest = np.flatnonzero(~taken)  # positions of nodes nobody took locally, ascending
    deficit = quota - take
    rest_lo = np.concatenate([[0], np.cumsum(deficit)])
    mine = np.concatenate(
        [ids[local_lo[rank] : local_lo[rank] + take[rank]], ids[rest[rest_lo[rank] : rest_lo[rank + 1]]]]
    )
    return torch.from_numpy(np.sort(mine))

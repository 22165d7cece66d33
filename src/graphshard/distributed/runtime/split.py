"""Work split: which training nodes (edges) each rank processes.

Deterministic and vectorised: every rank computes the same split from the same mask and partition
book and keeps its piece. Ranks ``r`` belong to partition ``r // T`` when there are ``T = world / P``
ranks (trainers) per partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...book import RangePartitionBook
from ...errors import InputError
from ...graph import to_numpy
from ..ranks.collectives import all_reduce_sum, exchange

if TYPE_CHECKING:
    import torch

    from ..ranks.context import DistContext


def node_split(
    mask: Any,
    book: RangePartitionBook,
    ntype: str | None = None,
    rank: int | None = None,
    *,
    world_size: int | None = None,
    force_even: bool = True,
) -> torch.Tensor:
    """IDs of the nodes selected by ``mask`` that rank ``rank`` of ``world_size`` should process.

    Every rank computes the same split and keeps its piece; the pieces are disjoint and together cover the
    selection. Ranks ``r`` belong to partition ``r // T`` with ``T = world_size / P`` ranks per partition.

    Args:
        mask: boolean, one entry per node of ``ntype`` (every node when None), in new-ID order.
        book: the graph's partition book.
        ntype: the node type; None: homogeneous IDs.
        rank: the rank whose piece to return; None (with ``world_size`` None): this process's rank in the
            initialised process group.
        world_size: the number of ranks; None: the process group's.
        force_even: True: sizes differ by at most one across ranks; each rank first takes nodes of its own
            partition (as many as its share allows), the rest are dealt to ranks short of their share.
            False: each rank gets only its own partition's selected nodes, split evenly among that
            partition's trainers.

    Returns:
        The rank's node IDs, ascending: per-type new IDs of ``ntype`` (homogeneous IDs when None).

    Raises:
        InputError: ``mask`` does not have one entry per node; no ``rank``/``world_size`` outside an
            initialised process group; ``rank`` outside ``[0, world_size)``; ``world_size`` not a multiple of
            the number of partitions; an unknown ``ntype``.
    """
    ids = np.flatnonzero(_bool_mask(mask, book.num_nodes(ntype), "node"))
    return _split(
        ids, to_numpy(book.nid2partid(ids, ntype)), book.num_partitions(), rank, world=world_size, force_even=force_even
    )


def edge_split(
    mask: Any,
    book: RangePartitionBook,
    etype: Any = None,
    rank: int | None = None,
    *,
    world_size: int | None = None,
    force_even: bool = True,
) -> torch.Tensor:
    """IDs of the edges selected by ``mask`` that rank ``rank`` of ``world_size`` should process.

    As `node_split`, for edges: an edge belongs to its destination's partition.

    Args:
        mask: boolean, one entry per edge of ``etype`` (every edge when None), in new-ID order.
        book: the graph's partition book.
        etype: the edge type (canonical tuple or ``src:rel:dst``, or a relation name that names one type);
            None: homogeneous IDs.
        rank: the rank whose piece to return; None (with ``world_size`` None): this process's rank in the
            initialised process group.
        world_size: the number of ranks; None: the process group's.
        force_even: as for `node_split`.

    Returns:
        The rank's edge IDs, ascending: per-type new IDs of ``etype`` (homogeneous IDs when None).

    Raises:
        InputError: ``mask`` does not have one entry per edge; no ``rank``/``world_size`` outside an
            initialised process group; ``rank`` outside ``[0, world_size)``; ``world_size`` not a multiple of
            the number of partitions; an unknown ``etype``.
    """
    ids = np.flatnonzero(_bool_mask(mask, book.num_edges(etype), "edge"))
    return _split(
        ids, to_numpy(book.eid2partid(ids, etype)), book.num_partitions(), rank, world=world_size, force_even=force_even
    )


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


def trainers_per_partition(world: int, num_parts: int) -> int:
    """Ranks per partition (``world / num_parts``); an :class:`InputError` unless that is a whole number."""
    if world % num_parts:
        raise InputError(f"world size {world} must be a multiple of the number of partitions {num_parts}")
    return world // num_parts


def rank_partition(rank: int, world: int, num_parts: int) -> tuple[int, int]:
    """``(partition, trainer index within it)`` of rank ``rank``: ranks ``r`` belong to partition ``r // T``."""
    return divmod(rank, trainers_per_partition(world, num_parts))


Piece = tuple[int, int, int]  # (partition, start, stop): positions in that partition's selection, ascending


def split_plan(counts: np.ndarray, world: int, force_even: bool = True) -> list[list[Piece]]:
    """Each rank's pieces of the partitions' selections, from the number of selected items of each partition
    alone (``counts[p]``): the deal :func:`node_split` makes. Rank ``r``'s local candidates are its
    partition's selection cut evenly among the partition's trainers; with ``force_even`` it keeps as many as
    its quota (sizes differ by at most one) allows, and the candidates nobody kept are dealt, in order, to the
    ranks short of their quota."""
    counts = np.asarray(counts, dtype=np.int64)
    num_parts = counts.shape[0]
    trainers = trainers_per_partition(world, num_parts)
    starts = np.concatenate(([0], np.cumsum(counts)))
    part = np.arange(world) // trainers  # each rank's partition
    t = np.arange(world) % trainers
    size = counts[part]
    lo = starts[part] + size * t // trainers  # global positions of each rank's local candidates
    hi = starts[part] + size * (t + 1) // trainers
    if not force_even:
        return [_pieces(int(part[r]), int(lo[r]), int(hi[r]), starts) for r in range(world)]
    n = int(starts[-1])
    quota = np.array([n * (r + 1) // world - n * r // world for r in range(world)], dtype=np.int64)
    take = np.minimum(quota, hi - lo)
    rest_at = np.concatenate(([0], np.cumsum(hi - lo - take)))  # where each rank's leftovers start among all
    want_at = np.concatenate(([0], np.cumsum(quota - take)))  # where each rank's extra share starts among them
    plan = []
    for r in range(world):  # loops over ranks, never over items
        pieces = _pieces(int(part[r]), int(lo[r]), int(lo[r] + take[r]), starts)
        for q in np.flatnonzero((rest_at[1:] > want_at[r]) & (rest_at[:-1] < want_at[r + 1])):
            a, b = max(want_at[r], rest_at[q]) - rest_at[q], min(want_at[r + 1], rest_at[q + 1]) - rest_at[q]
            pieces += _pieces(int(part[q]), int(lo[q] + take[q] + a), int(lo[q] + take[q] + b), starts)
        plan.append(pieces)
    return plan


def _pieces(p: int, a: int, b: int, starts: np.ndarray) -> list[Piece]:
    return [(p, a - int(starts[p]), b - int(starts[p]))] if b > a else []


def _split(
    ids: np.ndarray, part: np.ndarray, num_parts: int, rank: int | None, *, world: int | None, force_even: bool
) -> torch.Tensor:
    import torch

    rank, world = _rank_world(rank, world)
    starts = np.searchsorted(part, np.arange(num_parts + 1))  # ids are ascending, so grouped by partition
    plan = split_plan(np.diff(starts), world, force_even)[rank]
    mine = [ids[starts[p] + a : starts[p] + b] for p, a, b in plan]
    return torch.from_numpy(np.sort(np.concatenate([np.zeros(0, ids.dtype), *mine])))


def split_owned(
    ctx: DistContext, selected: np.ndarray, num_parts: int, force_even: bool = True, *, what: str = "split"
) -> np.ndarray:
    """This rank's piece of a selection, the same as :func:`node_split` deals from the whole mask, when each
    rank knows only its own partition's selected IDs (``selected``, ascending; the same on every trainer of
    partition ``rank // (world / num_parts)``). Memory and traffic are O(this partition's selection + the
    items dealt across partitions), never O(all items). Collective."""
    world, rank = ctx.world_size, ctx.rank
    trainers = trainers_per_partition(world, num_parts)
    part, trainer = rank_partition(rank, world, num_parts)
    first = trainer == 0
    counts = np.zeros(num_parts, dtype=np.int64)
    counts[part] = selected.shape[0] if first else 0  # told once per partition
    plan = split_plan(all_reduce_sum(ctx, counts, f"{what} (counts)"), world, force_even)
    selected = np.asarray(selected, dtype=np.int64)
    send = [np.zeros(0, dtype=np.int64) for _ in range(world)]
    if first:  # the partition's first trainer sends its items dealt to ranks of other partitions
        for m in range(world):
            mine = [selected[a:b] for p, a, b in plan[m] if p == part and m // trainers != part]
            send[m] = np.concatenate([send[m], *mine])
    got = exchange(ctx, send, f"{what} (items dealt across partitions)")
    own = [selected[a:b] for p, a, b in plan[rank] if p == part]
    return np.sort(np.concatenate([np.zeros(0, dtype=np.int64), *own, *got]))

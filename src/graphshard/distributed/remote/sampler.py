"""Distributed neighbour sampling: every layer samples local frontier nodes in-process with the compiled
kernel and remote ones in one batched RPC per owning partition, then merges the results in frontier
order, de-duplicates and relabels (``sampling.neighbor.expand_hops``). Works in global homogeneous new
IDs; :meth:`DistNeighborSampler.to_hetero` regroups an output by node and edge type."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch

from ...book import RangePartitionBook
from ...errors import InputError
from ...graph import parse_etype
from ...sampling.hetero import HeteroSamplerOutput, to_hetero
from ...sampling.neighbor import DenseSlot, HashSlot, SamplerOutput, Slot, expand_hops
from ..groups.rpc import RpcGroup, by_owner, register, registered
from ..host.counts import Counts
from ..host.threads import budget_this_thread
from ..transport import channel
from .sampling_graph import SamplingGraph, assemble

SAMPLING_GRAPH = "sampling-graph"


def serve_sampling(local: SamplingGraph, key: str = "") -> None:
    """Make this process answer sampling requests for ``local`` under ``key`` (the same on every
    member; call on every member, then barrier)."""
    local.key = key
    register(f"{SAMPLING_GRAPH}/{key}", local)


@channel.handler
def _sample_remote(
    served: str,
    gids: torch.Tensor,
    fanouts: torch.Tensor,
    replace: bool,
    key: int,
    seed_time: torch.Tensor | None,
    time_attr: str | None,
) -> tuple[torch.Tensor, ...]:
    budget_this_thread()  # an RPC worker thread: numba's setting is per thread
    st = None if seed_time is None else seed_time.numpy()
    out = registered(f"{SAMPLING_GRAPH}/{served}").sample(
        gids.numpy(), fanouts.numpy(), replace, key, seed_time=st, time_attr=time_attr
    )
    return tuple(torch.from_numpy(a) for a in out)


def fanout_table(num_neighbors: list[int] | dict[Any, list[int]], etypes: list[tuple[str, str, str]]) -> np.ndarray:
    """``(hops, edge types)`` fanouts from one list for all edge types, or a list per edge type (types
    not named are not sampled). ``-1`` = every in-edge."""
    if not isinstance(num_neighbors, dict):
        return np.repeat(np.asarray(list(num_neighbors), dtype=np.int64)[:, None], len(etypes), axis=1)
    lists = {parse_etype(k) if isinstance(k, str) else tuple(k): list(v) for k, v in num_neighbors.items()}
    unknown = [k for k in lists if k not in etypes]
    if unknown:
        raise InputError(f"num_neighbors names unknown edge types {unknown}; known: {etypes}")
    hops = {len(v) for v in lists.values()}
    if len(hops) != 1:
        raise InputError(f"num_neighbors lists differ in length: {sorted(hops)}")
    table = np.zeros((hops.pop(), len(etypes)), dtype=np.int64)
    for r, et in enumerate(etypes):
        if et in lists:
            table[:, r] = lists[et]
    return table


# Relabelling a batch: a slot per node of the graph (8 bytes each) is fastest and stays below 32 MiB up to 4 M
# nodes; beyond, a table that grows with the batch (~1.6 x the time per relabelled node, memory O(batch)).
DENSE_SLOT_NODES = 1 << 22


class DistNeighborSampler:
    """Layer-wise sampling of in-edges over all partitions, in global homogeneous new IDs.

    Every member of ``group`` must serve its partition (`serve_sampling`) before requests start.

    Args:
        group: the RPC group whose members serve the partitions.
        local: the sampling graph of this process's partition.
        book: the graph's partition book.
        num_neighbors: the fanout of each hop (``-1``: every in-edge), one list for all edge types, or a
            list per edge type (types not named are not sampled).
        replace: sample neighbours with replacement.
        disjoint: give every seed its own subtree.
        time_attr: the node attribute holding each node's time: temporal sampling (``seed_time`` of
            `sample`) keeps only neighbours not newer than their seed and implies disjoint mode.
        near: sampling graphs of other partitions this process reads itself (co-located, see
            `graphshard.distributed.remote.colocated`), by runtime partition.

    Raises:
        InputError: ``num_neighbors`` names unknown edge types, or its lists differ in length.
    """

    def __init__(
        self,
        group: RpcGroup,
        local: SamplingGraph,
        book: RangePartitionBook,
        num_neighbors: list[int] | dict[Any, list[int]],
        *,
        replace: bool = False,
        disjoint: bool = False,
        time_attr: str | None = None,
        near: dict[int, SamplingGraph] | None = None,
    ):
        self.group, self.local, self.book, self.near = group, local, book, dict(near or {})
        self.fanouts = fanout_table(num_neighbors, book.canonical_etypes)
        self.replace, self.disjoint, self.time_attr = replace, disjoint, time_attr
        self.part_id = group.part_id(book.num_partitions())
        n = book.num_nodes()  # IDs span the whole graph: a slot per node only while that stays small
        self._slot: Slot = DenseSlot(n) if n <= DENSE_SLOT_NODES else HashSlot()
        self.stats = Counts(
            "seeds", "remote_seeds", "remote_requests", "bytes_sent", "bytes_received", "colocated_seeds"
        )

    def _layer(self, ids: np.ndarray, times: np.ndarray | None, fanouts: np.ndarray, key: int):
        parts = self.book.nid2partid(ids).numpy()
        fan_t = torch.from_numpy(fanouts)

        def local(pos: np.ndarray, graph: SamplingGraph = self.local):
            return graph.sample(
                ids[pos],
                fanouts,
                self.replace,
                key,
                seed_time=None if times is None else times[pos],
                time_attr=self.time_attr,
            )

        def args(pos: np.ndarray) -> tuple:
            at = None if times is None else torch.from_numpy(times[pos])
            return (self.local.key, torch.from_numpy(ids[pos]), fan_t, self.replace, key, at, self.time_attr)

        near = {p: partial(local, graph=g) for p, g in self.near.items()}
        pieces = by_owner(
            self.group,
            parts,
            self.book.num_partitions(),
            local,
            remote=_sample_remote,
            args=args,
            what="sampling",
            near=near,
        )
        blocks = []
        for pos, res in pieces:
            res = tuple(a.numpy() if isinstance(a, torch.Tensor) else a for a in res)
            if int(parts[pos[0]]) in self.near:
                self.stats.add(colocated_seeds=int(pos.size))
            elif parts[pos[0]] != self.part_id:
                self.stats.add(
                    remote_seeds=int(pos.size),
                    remote_requests=1,
                    bytes_sent=int(pos.size) * (16 if times is not None else 8),
                    bytes_received=sum(a.nbytes for a in res),
                )
            blocks.append((pos, res))
        self.stats.add(seeds=int(ids.shape[0]))
        return assemble(ids.shape[0], blocks)

    def sample(self, seeds: Any, seed: int = 0, seed_time: Any = None) -> SamplerOutput:
        """Sample ``len(fanouts)`` hops of in-neighbours of global homogeneous ``seeds``.

        Deterministic for a given ``seed``, whatever the partitioning.

        Args:
            seeds: global homogeneous node IDs.
            seed: the random seed.
            seed_time: each seed's time (temporal sampling; needs the sampler's ``time_attr``).

        Returns:
            The sampled nodes (seeds first; de-duplicated unless disjoint) and edges, in global homogeneous
            IDs.

        Raises:
            InputError: ``seed_time`` without the sampler's ``time_attr``, or of another shape than ``seeds``.
        """
        budget_this_thread()  # the caller may be any thread (a loader's, a service's)
        seeds = np.asarray(seeds, dtype=np.int64)
        times = None
        if seed_time is not None:
            if self.time_attr is None:
                raise InputError("seed_time given but the sampler has no time_attr")
            times = np.asarray(seed_time, dtype=np.float64)
            if times.shape != seeds.shape:
                raise InputError(f"seed_time has shape {times.shape}, seeds {seeds.shape}")
        disjoint = self.disjoint or times is not None

        def layer(ids, owner, hop_fanouts, hop):
            return self._layer(ids, None if times is None else times[owner], hop_fanouts, seed * 1_000_003 + hop)

        return expand_hops(
            seeds, list(self.fanouts), layer, self.book.num_nodes(), slot=None if disjoint else self._slot
        )

    def in_neighbours(self, ids: np.ndarray, etype: int, k: int, key: int) -> tuple[np.ndarray, np.ndarray]:
        """Up to ``k`` random in-neighbours along one edge type of each of the global homogeneous ``ids``.

        One hop, as `sample`'s.

        Args:
            ids: global homogeneous node IDs.
            etype: the edge type, by its index in the book's edge types.
            k: the most neighbours of each node.
            key: the random key of the draw.

        Returns:
            ``(counts, neighbours)``: how many neighbours each node got, and the neighbours listed node by
            node.
        """
        fanouts = np.zeros(len(self.book.canonical_etypes), dtype=np.int64)
        fanouts[etype] = k
        counts, nbrs, _ = self._layer(np.asarray(ids, dtype=np.int64), None, fanouts, key)
        return counts, nbrs

    def to_hetero(self, out: SamplerOutput) -> HeteroSamplerOutput:
        """``out`` regrouped by node and edge type (per-type IDs).

        Args:
            out: an output of `sample`.

        Returns:
            The same sample by node and edge type.
        """
        ntype, nid = (t.numpy() for t in self.book.map_to_per_ntype(out.node))
        etype, eid = (t.numpy() for t in self.book.map_to_per_etype(out.edge))
        return to_hetero(
            out, self.book.ntypes, ntype, nid, etypes=self.book.canonical_etypes, edge_type=etype, edge_id=eid
        )

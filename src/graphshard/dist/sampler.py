"""Distributed neighbour sampling (homogeneous graphs): every layer samples local seeds in-process with
the compiled kernel and remote seeds in one batched RPC per owner, then merges the results in seed
order, de-duplicates and relabels. Output is a :class:`~graphshard.sampling.SamplerOutput` over
global new node IDs."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..book import RangePartitionBook
from ..errors import InputError
from ..format.load import PartitionGraph
from ..partition.kernels import ragged_ranges
from ..sampling.kernels import sample_layer
from ..sampling.neighbor import SamplerOutput, expand_hops
from .collectives import barrier
from .context import DistContext, DistError
from .rpc import register, registered, worker_name

_GRAPH = "sampling-graph"


class LocalSamplingGraph:
    """One partition's in-adjacency, addressed by global new IDs of its inner nodes."""

    def __init__(self, graph: PartitionGraph, book: RangePartitionBook, part_id: int):
        if len(book.ntypes) != 1:
            raise InputError("distributed sampling of heterogeneous graphs is not supported yet")
        self.indptr = graph.indptr.numpy()
        self.indices = graph.indices.numpy()
        self.node_gid = graph.ndata["_ID"].numpy()
        self.edge_gid = graph.edata["_ID"].numpy()
        ids = book.partid2nids(part_id)
        self.start, self.count = (int(ids[0]) if ids.numel() else 0), int(ids.numel())

    def sample(self, gids: np.ndarray, fanout: int, replace: bool, key: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(counts, neighbour global IDs, edge global IDs)`` of in-edges of these inner nodes."""
        local = gids - self.start
        if local.size and (local.min() < 0 or local.max() >= self.count):
            raise DistError(f"sampling request for nodes this partition does not own (it owns "
                            f"[{self.start}, {self.start + self.count}))")
        counts, pos = sample_layer(self.indptr, self.indices, local, fanout, replace, key)
        return counts, self.node_gid[self.indices[pos]], self.edge_gid[pos]


def _sample_remote(gids: torch.Tensor, fanout: int, replace: bool, key: int) -> tuple[torch.Tensor, ...]:
    counts, nbrs, edges = registered(_GRAPH).sample(gids.numpy(), fanout, replace, key)
    return torch.from_numpy(counts), torch.from_numpy(nbrs), torch.from_numpy(edges)


class DistNeighborSampler:
    """Layer-wise sampling over all partitions (fanout ``-1`` = every in-edge). Construction is
    collective: no rank sends a request before every rank has registered its partition."""

    def __init__(self, ctx: DistContext, graph: PartitionGraph, book: RangePartitionBook, fanouts: list[int],
                 replace: bool = False):
        self.ctx, self.book, self.fanouts, self.replace = ctx, book, list(fanouts), replace
        self.trainers = ctx.world_size // book.num_partitions()
        self.part_id = ctx.rank // self.trainers
        self.local = LocalSamplingGraph(graph, book, self.part_id)
        register(_GRAPH, self.local)
        barrier(ctx, "sampling graphs registered")
        self._slot = np.full(book.num_nodes(), -1, dtype=np.int64)
        self.stats = {"seeds": 0, "remote_seeds": 0, "remote_requests": 0, "bytes_sent": 0, "bytes_received": 0}

    def _layer(self, seeds: np.ndarray, fanout: int, key: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        import torch.distributed.rpc as rpc

        parts = self.book.nid2partid(seeds).numpy()
        counts = np.zeros(seeds.shape[0], dtype=np.int64)
        blocks, pending = [], []
        for p in np.unique(parts):
            pos = np.flatnonzero(parts == p)
            if p == self.part_id:
                blocks.append((pos, self.local.sample(seeds[pos], fanout, self.replace, key)))
            else:
                owner = int(p) * self.trainers
                self.stats["remote_seeds"] += int(pos.size)
                self.stats["remote_requests"] += 1
                self.stats["bytes_sent"] += int(pos.size) * 8
                fut = rpc.rpc_async(worker_name(owner), _sample_remote,
                                    args=(torch.from_numpy(seeds[pos]), fanout, self.replace, key),
                                    timeout=self.ctx.timeout)
                pending.append((pos, owner, fut))
        for pos, owner, fut in pending:
            try:
                c, n, e = fut.wait()
            except Exception as exc:
                raise DistError(f"rank {self.ctx.rank}: sampling request to rank {owner} failed: {exc}") from exc
            blocks.append((pos, (c.numpy(), n.numpy(), e.numpy())))
            self.stats["bytes_received"] += c.nbytes + n.nbytes + e.nbytes
        self.stats["seeds"] += int(seeds.shape[0])
        for pos, (c, _, _) in blocks:
            counts[pos] = c
        starts = np.cumsum(counts) - counts  # where each seed's neighbours go, in seed order
        nbrs = np.empty(int(counts.sum()), dtype=np.int64)
        edges = np.empty_like(nbrs)
        for pos, (c, n, e) in blocks:
            at = ragged_ranges(starts[pos], c)
            nbrs[at], edges[at] = n, e
        return counts, nbrs, edges

    def sample(self, seeds: Any, seed: int = 0) -> SamplerOutput:
        """Sample ``len(fanouts)`` hops of in-neighbours of global ``seeds`` (de-duplicated, seeds first)."""
        return expand_hops(np.asarray(seeds, dtype=np.int64), self.fanouts,
                           lambda ids, owner, fanout, hop: self._layer(ids, fanout, seed * 1_000_003 + hop),
                           self.book.num_nodes(), self._slot)

"""Ranking figures of link prediction (OGB's conventions): each held-out edge ``(u, v)`` is ranked
against candidate destinations ``(u, v')``. Its rank is 1 + the candidates scoring higher (ties count
half); MRR is the mean of 1 / rank, Hits@K the share of edges ranked K or better, AUC the share of
(edge, candidate) pairs the edge wins. *Filtered* figures leave out of each list the candidates that
are known edges themselves (training, validation or test), which would otherwise count against a
model that rightly scores them high; raw figures keep them.

The known edges are sharded (:class:`KnownEdges`): the keys ``src * n_dst + dst`` (new IDs) of the edges
into a partition's nodes are held, sorted, by that partition's first process (8 bytes per edge of its
own, its reverse edges when the relation joins one node type, and the held-out edges into its nodes); a
candidate is looked up by one RPC per partition its destinations belong to. No rank gathers the keys of
the whole graph."""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from ..distributed.collectives import all_reduce_sum, exchange
from ..distributed.graph import DistGraph
from ..distributed.rpc import by_owner
from ..distributed.runtime import Session
from ..errors import InputError
from ..graph import EType

FIGURES = ("rr", "count", "auc_wins", "auc_pairs", "hits")  # sums of one list of held-out edges


def rank_sums(pos: torch.Tensor, negs: torch.Tensor, k: int, keep: torch.Tensor | None = None) -> np.ndarray:
    """Sums of :data:`FIGURES` over edges with scores ``pos`` (E) against candidates ``negs`` (E, C);
    ``keep`` (E, C, bool): the candidates that count (all by default)."""
    keep = torch.ones_like(negs, dtype=torch.bool) if keep is None else keep
    above = ((negs > pos[:, None]) & keep).sum(1) + 0.5 * ((negs == pos[:, None]) & keep).sum(1)
    rank = 1.0 + above
    pairs = keep.sum()
    return np.array(
        [float((1.0 / rank).sum()), pos.shape[0], float(pairs - above.sum()), float(pairs), float((rank <= k).sum())]
    )


def figures(total: np.ndarray, k: int, suffix: str = "") -> dict[str, float]:
    """MRR, AUC and Hits@``k`` from summed :func:`rank_sums` (over lists and ranks)."""
    rr, count, wins, pairs, hits = (float(v) for v in total)
    return {
        f"mrr{suffix}": rr / max(1.0, count),
        f"auc{suffix}": wins / max(1.0, pairs),
        f"hits@{k}{suffix}": hits / max(1.0, count),
    }


BUILD_EDGES = 1 << 22  # edges each rank sends per exchange while the known edges are sharded
_SHARDS: dict[str, np.ndarray] = {}  # name -> the sorted keys this process holds
_SETS = itertools.count()  # construction is collective, so every rank names its sets alike


class KnownEdges:
    """The known edges of ``et`` (new per-type IDs), sharded by the partition of the destination: this
    partition's training edges (the edges into its nodes, which it stores) and the ``held`` ``(2, E)`` pairs
    this rank read (every held-out edge is read by one rank), both directions when ``et`` joins one node
    type (a link is undirected there). Construction (all-to-all exchanges of ``BUILD_EDGES`` edges from each
    rank at a time, as many on every rank) and :meth:`free` are collective; lookups (:meth:`__call__`) are
    not. Held: 8 bytes per distinct key on the partition's first process."""

    def __init__(self, s: Session, g: DistGraph, et: EType, held: list[np.ndarray]):
        self.g, self.et = g, et
        self.book, self.n_dst = g.get_partition_book(), g.num_nodes(et[2])
        self.name = f"known-edges{next(_SETS)}#{g.key}"
        per = g.group.per_part(self.book.num_partitions())
        lists = [(h[0], h[1]) for h in (np.asarray(h, dtype=np.int64).reshape(2, -1) for h in held)]
        if s.rank % per == 0:  # one rank per served partition contributes its edges
            lists.append(g.local_edges(et))
        starts = np.cumsum([0, *(a.shape[0] for a, _ in lists)])
        sizes = np.zeros(s.world_size, dtype=np.int64)
        sizes[s.rank] = starts[-1]
        rounds = math.ceil(int(all_reduce_sum(s.ctx, sizes, "known edges (counts)").max()) / BUILD_EDGES)
        got: list[np.ndarray] = []
        for r in range(rounds):  # the same number of exchanges on every rank; a loop over blocks of edges
            lo, hi = r * BUILD_EDGES, (r + 1) * BUILD_EDGES
            src, dst = (
                np.concatenate(
                    [np.zeros(0, np.int64)] + [e[i][max(0, lo - a) : max(0, hi - a)] for e, a in zip(lists, starts)]
                )
                for i in (0, 1)
            )
            if et[0] == et[2]:
                src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
            owner = self.book.nid2partid(dst, et[2]).numpy() * per  # the first rank of the destination's partition
            keys = src * self.n_dst + dst
            order = np.argsort(owner, kind="stable")
            bounds = np.searchsorted(owner[order], np.arange(s.world_size + 1))
            send = [np.unique(keys[order[bounds[q] : bounds[q + 1]]]) for q in range(s.world_size)]  # over ranks
            got += exchange(s.ctx, send, "known edges")
        del lists
        if s.rank % per == 0:
            _SHARDS[self.name] = _sorted_unique(got)
        g.group.barrier("known edges sharded")

    def __call__(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Whether each pair ``(src[i], dst[i, j])`` (new IDs) is a known edge (same shape as ``dst``)."""
        dst = np.asarray(dst, dtype=np.int64)
        flat = dst.reshape(-1)
        keys = (np.asarray(src, dtype=np.int64)[:, None] * self.n_dst + dst).reshape(-1)
        found = np.zeros(keys.shape[0], dtype=bool)
        for pos, hit in by_owner(
            self.g.group,
            self.book.nid2partid(flat, self.et[2]).numpy(),
            self.book.num_partitions(),
            None,
            _lookup,
            lambda pos: (self.name, torch.from_numpy(keys[pos])),
            "known-edge lookup",
        ):
            found[pos] = hit.numpy()
        return found.reshape(dst.shape)

    def free(self) -> None:
        """Drop the shards (collective: once no rank looks up any more)."""
        self.g.group.barrier("known edges freed")
        _SHARDS.pop(self.name, None)


def _sorted_unique(pieces: list[np.ndarray]) -> np.ndarray:
    """The distinct values of ``pieces`` (int64), sorted; the list is emptied. Sorted in place: the peak is the
    pieces and their concatenation (16 bytes per value), never the several copies ``np.unique`` makes."""
    keys = np.concatenate([np.zeros(0, np.int64), *pieces])
    pieces.clear()
    keys.sort()
    if keys.shape[0] < 2:
        return keys
    first = np.empty(keys.shape[0], dtype=bool)
    first[0], first[1:] = True, keys[1:] != keys[:-1]
    return keys[first]


def _lookup(name: str, keys: torch.Tensor) -> torch.Tensor:
    """RPC handler: which of ``keys`` are in this process's shard of known edges ``name``."""
    if name not in _SHARDS:
        raise InputError(f"no known edges named {name!r} in this process")
    return torch.from_numpy(contains(_SHARDS[name], keys.numpy()))


def contains(known: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Whether each of ``keys`` is in the sorted array ``known``."""
    if not known.shape[0]:
        return np.zeros(keys.shape[0], dtype=bool)
    at = np.minimum(np.searchsorted(known, keys), known.shape[0] - 1)
    return known[at] == keys


def is_known(known: np.ndarray, src: np.ndarray, dst: np.ndarray, n_dst: int) -> np.ndarray:
    """Whether each pair ``(src[i], dst[i, j])`` is among the sorted ``known`` keys (same shape as ``dst``)."""
    keys = (src[:, None].astype(np.int64) * n_dst + dst).reshape(-1)
    return contains(known, keys).reshape(dst.shape)

"""Ranking figures of link prediction (OGB's conventions): each held-out edge ``(u, v)`` is ranked
against candidate destinations ``(u, v')``. Its rank is 1 + the candidates scoring higher (ties count
half); MRR is the mean of 1 / rank, Hits@K the share of edges ranked K or better, AUC the share of
(edge, candidate) pairs the edge wins. *Filtered* figures leave out of each list the candidates that
are known edges themselves (training, validation or test), which would otherwise count against a
model that rightly scores them high; raw figures keep them.

These sums are computed here, vectorised over a block of lists, rather than by torchmetrics' retrieval metrics,
which group their inputs by query and loop over the groups in Python (one iteration per held-out edge); the
tests check them against scikit-learn (label ranking average precision, top-k accuracy, ROC-AUC per list).
Sums of blocks add up over ranks, so the figures of all ranks together are exact.

The known edges are sharded (:class:`KnownEdges`): each partition's first process holds, sorted, the keys
(new IDs) of some of them, 8 bytes per key, and a candidate is looked up by one RPC per partition holding
its keys. No rank gathers the keys of the whole graph."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import torch

from ..distributed.groups.rpc import by_owner
from ..distributed.ranks.collectives import all_reduce_sum, exchange
from ..distributed.runtime.graph import DistGraph
from ..distributed.runtime.session import Session
from ..distributed.transport.channel import handler
from ..errors import InputError
from ..format.load import PartitionGraph
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
    """The known edges of ``et`` (new per-type IDs), sharded over the partitions: the training edges (each
    partition's, read from its stored edges a block at a time) and the ``held`` ``(2, E)`` pairs this rank read
    (every held-out edge is read by one rank). Between two node types an edge ``(u, v)`` is the key
    ``u * n_dst + v``, held by ``v``'s partition; within one node type a link is undirected: ``(u, v)`` and
    ``(v, u)`` are one key ``min * n + max``, held by the partition of one of its ends chosen by the parity of
    ``u + v`` (so the keys spread like the edges and a candidate in either direction finds it: one key per
    link, where keys of both directions took two, or four when the graph stores both). Construction
    (all-to-all exchanges of at most ``BUILD_EDGES`` edges from each rank at a time, as many on every rank)
    and :meth:`free` are collective; lookups (:meth:`__call__`) are not."""

    def __init__(self, s: Session, g: DistGraph, et: EType, held: list[np.ndarray]):
        self.g, self.et, self.undirected = g, et, et[0] == et[2]
        self.book, self.n_dst = g.get_partition_book(), g.num_nodes(et[2])
        self.name = f"known-edges{next(_SETS)}#{g.key}"
        per = g.group.per_part(self.book.num_partitions())
        first = s.rank % per == 0  # holds its partition's shard; contributes the partition's training edges
        sources = [_pairs(np.asarray(h, dtype=np.int64).reshape(2, -1)) for h in held]
        sources += _stored_edges(g, et) if first else []
        starts = np.cumsum([0, *(n for n, _ in sources)])
        sizes = np.zeros(s.world_size, dtype=np.int64)
        sizes[s.rank] = starts[-1]
        rounds = math.ceil(int(all_reduce_sum(s.ctx, sizes, "known edges (counts)").max()) / BUILD_EDGES)
        got: list[np.ndarray] = []
        for r in range(rounds):  # the same number of exchanges on every rank; a loop over blocks of edges
            lo, hi = r * BUILD_EDGES, (r + 1) * BUILD_EDGES
            pieces = [
                edges(max(0, lo - a), min(n, hi - a)) for (n, edges), a in zip(sources, starts) if lo < a + n and a < hi
            ]
            src, dst = (np.concatenate([np.zeros(0, np.int64), *(p[i] for p in pieces)]) for i in (0, 1))
            del pieces
            keys, part = self._keys(src, dst)
            rank = part * per  # the first rank of the partition holding the key
            order = np.argsort(rank, kind="stable")
            bounds = np.searchsorted(rank[order], np.arange(s.world_size + 1))
            send = [np.unique(keys[order[bounds[q] : bounds[q + 1]]]) for q in range(s.world_size)]  # over ranks
            del keys, part, rank, order
            got += exchange(s.ctx, send, "known edges")
        if first:
            _SHARDS[self.name] = _sorted_unique(got)
        g.group.barrier("known edges sharded")

    def _keys(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The key of each pair ``(src[i], dst[i])`` and the partition that holds it (see the class docstring)."""
        if not self.undirected:
            return src * self.n_dst + dst, self.book.nid2partid(dst, self.et[2]).numpy()
        lo, hi = np.minimum(src, dst), np.maximum(src, dst)
        end = np.where((lo + hi) % 2 == 0, lo, hi)
        return lo * self.n_dst + hi, self.book.nid2partid(end, self.et[2]).numpy()

    def __call__(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Whether each pair ``(src[i], dst[i, j])`` (new IDs) is a known edge (same shape as ``dst``)."""
        dst = np.asarray(dst, dtype=np.int64)
        keys, part = self._keys(
            np.broadcast_to(np.asarray(src, dtype=np.int64)[:, None], dst.shape).reshape(-1), dst.reshape(-1)
        )
        found = np.zeros(keys.shape[0], dtype=bool)
        for pos, hit in by_owner(
            self.g.group,
            part,
            self.book.num_partitions(),
            None,
            remote=_lookup,
            args=lambda pos: (self.name, torch.from_numpy(keys[pos])),
            what="known-edge lookup",
        ):
            found[pos] = hit.numpy()
        return found.reshape(dst.shape)

    def free(self) -> None:
        """Drop the shards (collective: once no rank looks up any more)."""
        self.g.group.barrier("known edges freed")
        _SHARDS.pop(self.name, None)


Edges = Callable[[int, int], tuple[np.ndarray, np.ndarray]]  # items [lo, hi) of a list -> (src, dst) of those kept


def _pairs(held: np.ndarray) -> tuple[int, Edges]:
    return held.shape[1], lambda lo, hi: (held[0, lo:hi], held[1, lo:hi])


def _stored_edges(g: DistGraph, et: EType) -> list[tuple[int, Edges]]:
    """The edges of ``et`` this process's partitions own (what :meth:`DistGraph.local_edges` returns), as one
    list per stored partition of its stored edges (inner edges of ``et`` kept), read a block at a time."""
    book, r = g.get_partition_book(), g.get_partition_book().canonical_etypes.index(et)
    out: list[tuple[int, Edges]] = []
    for part in g.local_graphs:

        def edges(lo: int, hi: int, part: PartitionGraph = part) -> tuple[np.ndarray, np.ndarray]:
            keep = part.edata["inner_edge"][lo:hi].numpy().astype(bool) & (part.edata["_TYPE"][lo:hi].numpy() == r)
            at = lo + np.flatnonzero(keep)
            gid = part.ndata["_ID"].numpy()
            dst = gid[np.searchsorted(part.indptr.numpy(), at, side="right") - 1]  # CSC: edges grouped by destination
            src = gid[part.indices[lo:hi].numpy()[keep]]
            return book.map_to_per_ntype(src)[1].numpy(), book.map_to_per_ntype(dst)[1].numpy()

        out.append((part.num_edges, edges))
    return out


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


@handler
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

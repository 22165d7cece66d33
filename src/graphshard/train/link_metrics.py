"""Ranking figures of link prediction (OGB's conventions): each held-out edge ``(u, v)`` is ranked
against candidate destinations ``(u, v')``. Its rank is 1 + the candidates scoring higher (ties count
half); MRR is the mean of 1 / rank, Hits@K the share of edges ranked K or better, AUC the share of
(edge, candidate) pairs the edge wins. *Filtered* figures leave out of each list the candidates that
are known edges themselves (training, validation or test), which would otherwise count against a
model that rightly scores them high; raw figures keep them."""

from __future__ import annotations

import numpy as np
import torch

from ..distributed.collectives import all_gather_bytes
from ..distributed.graph import DistGraph
from ..distributed.runtime import Session
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


def known_edges(s: Session, g: DistGraph, et: EType, held: list[np.ndarray]) -> np.ndarray:
    """Sorted keys ``src * n_dst + dst`` (original IDs) of every known edge of ``et``: the training edges
    of all partitions (gathered from every rank, 8 bytes per edge on each) and the ``held`` (2, E)
    arrays; both directions when ``et`` joins one node type (a link is undirected there). Collective."""
    book, n_dst = g.get_partition_book(), g.num_nodes(et[2])
    mine = np.zeros(0, dtype=np.int64)
    if s.rank % g.group.per_part(book.num_partitions()) == 0:  # one rank per served partition sends its edges
        src, dst = g.local_edges(et)
        mine = book.to_original(et[0], src).numpy() * n_dst + book.to_original(et[2], dst).numpy()
    parts = [np.frombuffer(b, dtype=np.int64) for b in all_gather_bytes(s.ctx, mine.tobytes(), "known edges")]
    parts += [p[0].astype(np.int64) * n_dst + p[1] for p in held]
    keys = np.concatenate(parts)
    if et[0] == et[2]:
        keys = np.concatenate([keys, (keys % n_dst) * n_dst + keys // n_dst])
    return np.unique(keys)


def is_known(known: np.ndarray, src: np.ndarray, dst: np.ndarray, n_dst: int) -> np.ndarray:
    """Whether each pair ``(src[i], dst[i, j])`` is among the ``known`` keys (same shape as ``dst``)."""
    keys = (src[:, None].astype(np.int64) * n_dst + dst).reshape(-1)
    at = np.minimum(np.searchsorted(known, keys), max(0, known.shape[0] - 1))
    found = known[at] == keys if known.shape[0] else np.zeros(keys.shape[0], dtype=bool)
    return found.reshape(dst.shape)

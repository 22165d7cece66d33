"""Negative pairs of link prediction's training batches, and its loss.

``--negatives`` (``k`` = ``ceil(--neg-ratio)`` negatives per positive ``(u, v)``, all pairs of nodes of the batch):

- ``uniform``: random pairs of the graph (the loader draws both ends; ``--neg-ratio`` per positive, rounded over
  the batch);
- ``in-batch``: ``(u_i, v_j)`` for the destinations of ``k`` other positives of the batch (the batch's order
  shifted by 1..k): no node beyond the positives' is sampled, and the negatives are as popular as real
  destinations;
- ``joint``: ``k`` random destinations shared by every positive of the batch (the loader draws them once per
  batch): ``k`` can be large (32, 128) for the price of ``k`` nodes' neighbourhoods;
- ``hard``: ``k`` random in-neighbours of ``v`` along the edge type — nodes next to the destination, often
  confused with it — drawn by the loader (random nodes where ``v`` has fewer), or with ``--hard-negatives NAME``
  the edge's own row of given destinations (edge data; -1: a random one), and ``k`` uniform random destinations
  beside them (hard negatives alone teach only to tell neighbours apart); drawn ones need an edge type between
  nodes of one type.

The loss is binary cross-entropy: ``uniform`` over positives and negatives together (as earlier releases);
the others weigh the positives' mean and the negatives' mean alike. With ``--edge-weight NAME`` each positive's
term is multiplied by its edge's weight (edge data, a number per edge)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import InputError

NEGATIVES = ("uniform", "in-batch", "joint", "hard")
LOADER_MODE = {"uniform": "binary", "in-batch": None, "joint": "joint", "hard": "hard"}  # the loader's neg_sampling


def per_positive(neg_ratio: float) -> int:
    """``k``: negatives per positive of the modes other than ``uniform``."""
    return max(1, math.ceil(neg_ratio))


def negative_pairs(mode: str, pairs: torch.Tensor, k: int, dst_neg: torch.Tensor | None = None) -> torch.Tensor:
    """The negative pairs (positions in the batch, as ``pairs``) of the ``B`` positive ``pairs``: ``in-batch``,
    ``B * k`` from the positives themselves; ``joint``, each positive with every one of ``dst_neg`` (the batch's
    shared destinations); ``hard``, each positive with its row of ``dst_neg`` ``(B, 2k)``."""
    b = pairs.shape[1]
    if mode == "joint":
        assert dst_neg is not None
        return torch.stack([pairs[0].repeat_interleave(dst_neg.shape[0]), dst_neg.repeat(b)])
    if mode == "hard":
        assert dst_neg is not None
        return torch.stack([pairs[0].repeat_interleave(dst_neg.shape[1]), dst_neg.reshape(-1)])
    shifts = torch.arange(1, k + 1, device=pairs.device)
    dst = pairs[1][(torch.arange(b, device=pairs.device)[:, None] + shifts[None, :]) % max(b, 1)].reshape(-1)
    return torch.stack([pairs[0].repeat_interleave(k), dst])


def scored_pairs(store: Any, negatives: str, k: int) -> torch.Tensor:
    """The pairs a training batch's ``store`` scores: the loader's positives then uniform negatives, or for the
    other modes its positives then their negatives (:func:`negative_pairs`)."""
    pairs = store.edge_label_index
    if negatives == "uniform":
        return pairs
    pos = pairs[:, : store.input_id.shape[0]]
    neg = negative_pairs(negatives, pos, k, store.dst_neg_index if "dst_neg_index" in store else None)
    return torch.cat([pos, neg], 1)


def batch_loss(scores: torch.Tensor, store: Any, negatives: str) -> torch.Tensor:
    """:func:`link_loss` of the scores of :func:`scored_pairs` of a batch's ``store`` (its positives' weights,
    when attached)."""
    weights = store.pos_weight if "pos_weight" in store else None
    label = store.edge_label if negatives == "uniform" else None
    return link_loss(scores, store.input_id.shape[0], weights, label)


def link_loss(scores: torch.Tensor, positives: int, weights: torch.Tensor | None, uniform_label=None) -> torch.Tensor:
    """Binary cross-entropy of ``scores`` (the ``positives`` first, then the negatives); ``weights``: each
    positive's. ``uniform_label``: the loader's 1/0 labels of a ``uniform`` batch (one mean over all pairs)."""
    scores = scores.float()
    if uniform_label is not None:
        w = None
        if weights is not None:
            w = torch.ones_like(scores)
            w[:positives] = weights.to(scores.device)
        return F.binary_cross_entropy_with_logits(scores, uniform_label.float(), weight=w)
    pos, neg = scores[:positives], scores[positives:]
    w = None if weights is None else weights.to(scores.device).float()
    pos_loss = F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos), weight=w)
    neg_loss = F.binary_cross_entropy_with_logits(neg, torch.zeros_like(neg))
    return 0.5 * (pos_loss + neg_loss)


def given_hard(s: Any, g: Any, et: Any, name: str, *, ids: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """This rank's training edges' given hard negatives ``(E, k)`` as per-type new destination IDs (-1 kept):
    edge data ``name`` of edge type ``et`` read for edges ``ids`` (ends ``pairs``, new IDs), its original IDs
    translated through the sharded map (collective). A value outside ``[-1, nodes)`` is an error naming the edge
    by its ends' original IDs, the same on every rank."""
    from ..distributed.ranks.collectives import all_gather_bytes
    from ..distributed.runtime.original import OriginalIds

    rows = g.edges[et].data[name][torch.from_numpy(ids)].numpy().astype(np.int64)
    rows = rows.reshape(rows.shape[0], -1)
    n = g.num_nodes(et[2])
    bad = np.flatnonzero(((rows < -1) | (rows >= n)).any(axis=1))
    mine = None if not bad.size else [int(pairs[0, bad[0]]), int(pairs[1, bad[0]]), int(rows[bad[0]].max())]
    told = [json.loads(b) for b in all_gather_bytes(s.ctx, json.dumps(mine).encode(), "hard negatives check")]
    found = min((t for t in told if t is not None), default=None)
    if found is not None:
        book = g.get_partition_book()
        u, v = (int(book.to_original(t, torch.tensor([found[i]]))[0]) for i, t in ((0, et[0]), (1, et[2])))
        raise InputError(
            f"--hard-negatives {name!r}: edge ({u}, {v}) of {':'.join(et)} (original node IDs) names node "
            f"{found[2]}, outside the {n} {et[2]!r} nodes (-1: none)"
        )
    ids_map = OriginalIds(g, et[2])
    out = rows.copy()
    given = rows >= 0
    out[given] = ids_map(rows[given])
    ids_map.free()
    return out

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
  confused with it — drawn by the loader (random nodes where ``v`` has fewer), and ``k`` uniform random
  destinations beside them (hard negatives alone teach only to tell neighbours apart); needs an edge type
  between nodes of one type.

The loss is binary cross-entropy: ``uniform`` over positives and negatives together (as earlier releases);
the others weigh the positives' mean and the negatives' mean alike. With ``--edge-weight NAME`` each positive's
term is multiplied by its edge's weight (edge data, a number per edge)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

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

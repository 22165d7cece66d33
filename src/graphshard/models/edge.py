"""Edge tasks: decoders that turn a labelled edge's two node representations (and its own features, for
``concat``) into its outputs — a score per class, a logit per label, or the target values — and the model
that puts an encoder and a decoder together."""

from __future__ import annotations

import torch
from torch import nn

from .registry import EDGE_DECODERS

__all__ = ["EDGE_DECODERS", "ConcatDecoder", "EdgeDistMultDecoder", "EdgeDotDecoder", "EdgeModel", "edge_decoder"]


class ConcatDecoder(nn.Module):
    """Outputs = MLP of ``[src, dst, edge features]`` (one hidden layer of ``hidden`` units)."""

    def __init__(self, dim: int, edge_dim: int, hidden: int, out_dim: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(2 * dim + edge_dim, hidden), nn.ReLU(), nn.Linear(hidden, out_dim))

    def forward(self, src: torch.Tensor, dst: torch.Tensor, attr: torch.Tensor | None = None) -> torch.Tensor:
        return self.mlp(torch.cat([src, dst] if attr is None else [src, dst, attr], -1))


class EdgeDotDecoder(nn.Module):
    """One output: the inner product of the two representations (an edge regression target)."""

    def forward(self, src: torch.Tensor, dst: torch.Tensor, attr: torch.Tensor | None = None) -> torch.Tensor:
        return (src * dst).sum(-1, keepdim=True)


class EdgeDistMultDecoder(nn.Module):
    """Output ``c`` = ``sum_k src[k] * r_c[k] * dst[k]``: a learnt diagonal relation per output (DistMult)."""

    def __init__(self, dim: int, out_dim: int):
        super().__init__()
        self.relations = nn.Parameter(torch.randn(out_dim, dim) / dim**0.5 + 1.0)

    def forward(self, src: torch.Tensor, dst: torch.Tensor, attr: torch.Tensor | None = None) -> torch.Tensor:
        return (src * dst) @ self.relations.T


def edge_decoder(name: str, dim: int, edge_dim: int, hidden: int, *, out_dim: int) -> nn.Module:
    """The decoder ``name`` (of :data:`EDGE_DECODERS`) from ``dim``-wide node representations (and ``edge_dim``
    edge feature columns, read by ``concat`` only) to ``out_dim`` outputs. Raises ValueError when ``dot``, which
    gives one number, is asked for more."""
    if name == "concat":
        return ConcatDecoder(dim, edge_dim, hidden, out_dim)
    if name == "distmult":
        return EdgeDistMultDecoder(dim, out_dim)
    if out_dim != 1:
        raise ValueError(f"decoder 'dot' gives one number per edge; these labels need {out_dim} outputs")
    return EdgeDotDecoder()


class EdgeModel(nn.Module):
    """Encoder + decoder in one module (so DDP synchronises both): the outputs of labelled edges of a batch.
    ``pairs`` holds positions of sources among the batch's ``src_type`` nodes (row 0) and of destinations among
    its ``dst_type`` nodes (row 1); ``target_attr`` the labelled edges' own features (``concat``)."""

    def __init__(self, encoder: nn.Module, decoder: nn.Module, src_type: str, dst_type: str):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self.src_type, self.dst_type = src_type, dst_type

    def forward(self, x, edge_index, hops, pairs: torch.Tensor, edge_attr=None, target_attr=None) -> torch.Tensor:
        h = self.encoder(x, edge_index, hops) if edge_attr is None else self.encoder(x, edge_index, hops, edge_attr)
        hs, hd = (h[self.src_type], h[self.dst_type]) if isinstance(h, dict) else (h, h)
        return self.decoder(hs[pairs[0]], hd[pairs[1]], target_attr)

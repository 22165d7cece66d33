"""Link prediction: decoders that score a (source, destination) pair of node representations, and the
model that puts an encoder and a decoder together."""

from __future__ import annotations

import torch
from torch import nn


class DotDecoder(nn.Module):
    """Score = inner product of the two representations."""

    def forward(self, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        return (src * dst).sum(-1)


class MLPDecoder(nn.Module):
    """Score = MLP of the element-wise product of the two representations (one hidden layer)."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        return self.mlp(src * dst).squeeze(-1)


class DistMultDecoder(nn.Module):
    """Score = ``sum_k src[k] * r[k] * dst[k]`` (DistMult, Yang et al., 2015): a learnt diagonal relation ``r``
    between the two ends, so the edge type's scores are not symmetric in what each dimension weighs."""

    def __init__(self, dim: int):
        super().__init__()
        self.relation = nn.Parameter(torch.ones(dim))

    def forward(self, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        return (src * self.relation * dst).sum(-1)


class LinkModel(nn.Module):
    """Encoder + decoder in one module (so DDP synchronises both): scores node pairs of a batch.
    ``pairs`` holds positions of sources among the batch's ``src_type`` nodes (row 0) and of
    destinations among its ``dst_type`` nodes (row 1)."""

    def __init__(self, encoder: nn.Module, decoder: nn.Module, src_type: str, dst_type: str):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
        self.src_type, self.dst_type = src_type, dst_type

    def forward(self, x, edge_index, hops, pairs: torch.Tensor, edge_attr=None) -> torch.Tensor:
        h = self.encoder(x, edge_index, hops) if edge_attr is None else self.encoder(x, edge_index, hops, edge_attr)
        hs, hd = (h[self.src_type], h[self.dst_type]) if isinstance(h, dict) else (h, h)
        return self.decoder(hs[pairs[0]], hd[pairs[1]])

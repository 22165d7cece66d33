"""GraphSAGE (mean aggregation) over sampled mini-batches, built from PyG's ``SAGEConv``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import SAGEConv

from .aggregate import relu_dropout, sage_forward, sage_rows
from .spec import ModelSpec


class GraphSAGE(nn.Module):
    """``num_layers`` SAGEConv layers (ReLU + dropout between them). ``forward(x, edge_index)`` returns
    one row per node; the first ``batch_size`` rows of a mini-batch are its seeds.

    With ``hops = (num_sampled_nodes, num_sampled_edges)`` of a batch whose nodes and edges are ordered by
    hop (as the samplers make them), layer ``i`` computes rows only for the nodes later layers still
    need — hops ``0 .. L-1-i`` — from the edges into them, and the output has rows for the seeds only.
    The seeds' rows are the same as without trimming; the work of the first layer drops by the size of
    the last hop."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, dropout: float = 0.5):
        super().__init__()
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        self.convs = nn.ModuleList(SAGEConv(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> "GraphSAGE":
        return cls(spec.in_dim, spec.hidden, spec.out_dim, spec.num_layers, spec.dropout)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, hops: tuple[list[int], list[int]] | None = None
                ) -> torch.Tensor:
        depth = len(self.convs)
        if hops is not None and len(hops[0]) != depth + 1:
            hops = None  # sampled for another depth: nothing to trim by
        for i, conv in enumerate(self.convs):
            if hops is None:
                x = conv(x, edge_index)
            else:  # drop the last i hops of edges and the last i + 1 hops of destinations
                rows, edges = sum(hops[0][:depth - i]), sum(hops[1][:len(hops[1]) - i])
                x = sage_forward(conv, x, x[:rows], edge_index[:, :edges])
            if i < depth - 1:
                x = relu_dropout(x, self.dropout, self.training)
        return x

    # Layer-wise inference (see graphshard.infer): one layer at a time over (sources, destinations, edges).
    @property
    def num_layers(self) -> int:
        return len(self.convs)

    def layer_inputs(self, x: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return x

    def layer(self, i: int, x_src: dict[str, torch.Tensor], x_dst: dict[str, torch.Tensor],
              edges: dict[tuple[str, str, str], torch.Tensor]) -> dict[str, torch.Tensor]:
        """Layer ``i`` for the destination rows (``edges``: source positions, destination positions)."""
        (t,) = x_dst
        ei = next(iter(edges.values()), torch.zeros((2, 0), dtype=torch.long))
        out = sage_rows(self.convs[i], x_src[t], x_dst[t], ei)
        return {t: F.relu(out) if i < len(self.convs) - 1 else out}

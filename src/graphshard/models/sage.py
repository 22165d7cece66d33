"""GraphSAGE (mean aggregation) over sampled mini-batches, built from PyG's ``SAGEConv``."""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric.nn import SAGEConv

from .aggregate import sage_forward
from .spec import ModelSpec
from .stack import ConvStack, widths


class GraphSAGE(ConvStack):
    """``num_layers`` SAGEConv layers (ReLU + dropout between them). ``forward(x, edge_index)`` returns
    one row per node; the first ``batch_size`` rows of a mini-batch are its seeds.

    With ``hops = (num_sampled_nodes, num_sampled_edges)`` of a batch whose nodes and edges are ordered by
    hop (as the samplers make them), layer ``i`` computes rows only for the nodes later layers still
    need — hops ``0 .. L-1-i`` — from the edges into them, and the output has rows for the seeds only.
    The seeds' rows are the same as without trimming; the work of the first layer drops by the size of
    the last hop. Where a layer's inputs need no gradient, the mean is one CSR product
    (:func:`~.aggregate.sage_forward`)."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, *, dropout: float = 0.5):
        dims = widths(in_dim, hidden, out_dim, num_layers)
        super().__init__([SAGEConv(a, b) for a, b in zip(dims[:-1], dims[1:])], dropout)

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> GraphSAGE:
        return cls(spec.in_dim, spec.hidden, spec.out_dim, spec.num_layers, dropout=spec.dropout)

    def _call(
        self,
        conv: nn.Module,
        x: torch.Tensor,
        x_dst: torch.Tensor | None,
        edge_index: torch.Tensor,
        *,
        edge_attr: torch.Tensor | None,
    ) -> torch.Tensor:
        return conv(x, edge_index) if x_dst is None else sage_forward(conv, x, x_dst, edge_index)

"""GIN (graph isomorphism network) over sampled mini-batches, built from PyG's ``GINConv`` (``GINEConv``
with edge features)."""

from __future__ import annotations

from torch import nn
from torch_geometric.nn import GINConv, GINEConv

from .spec import ModelSpec
from .stack import ConvStack, widths


def _mlp(a: int, b: int) -> nn.Module:
    """The MLP of one layer. Its normalisation is per row (a sum over a node's neighbours grows with its
    degree; without it, the sampled sums of the first steps kill the ReLUs of GINE), so a row's output
    does not depend on the batch: layer-wise inference stays exact and a one-node batch trains."""
    return nn.Sequential(nn.Linear(a, b), nn.LayerNorm(b), nn.ReLU(), nn.Linear(b, b))


class GIN(ConvStack):
    """``num_layers`` ``GINConv`` layers, each a two-layer MLP (linear, layer norm, ReLU, linear) of
    ``(1 + eps) x_v + sum of the neighbours' rows`` with a learnt ``eps``; with ``edge_dim``, ``GINEConv``
    adds each edge's (projected) features to its source row before the sum."""

    def __init__(
        self,
        in_dim: int,
        hidden: int,
        out_dim: int,
        num_layers: int = 2,
        *,
        dropout: float = 0.5,
        edge_dim: int | None = None,
    ):
        dims = widths(in_dim, hidden, out_dim, num_layers)
        if edge_dim is None:
            convs = [GINConv(_mlp(a, b), train_eps=True) for a, b in zip(dims[:-1], dims[1:])]
        else:
            convs = [GINEConv(_mlp(a, b), train_eps=True, edge_dim=edge_dim) for a, b in zip(dims[:-1], dims[1:])]
        super().__init__(convs, dropout, uses_edge_attr=edge_dim is not None)

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> GIN:
        return cls(
            spec.in_dim, spec.hidden, spec.out_dim, spec.num_layers, dropout=spec.dropout, edge_dim=spec.edge_dim
        )

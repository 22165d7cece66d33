"""GAT (graph attention) over sampled mini-batches, built from PyG's ``GATConv``."""

from __future__ import annotations

from torch_geometric.nn import GATConv

from ..errors import InputError
from .spec import ModelSpec
from .stack import ConvStack, widths


class GAT(ConvStack):
    """``num_layers`` ``GATConv`` layers: the hidden ones with ``heads`` attention heads of
    ``hidden / heads`` channels each, concatenated; the last one a single head. ``attn_dropout`` drops
    attention coefficients in training; ``edge_dim`` makes the attention read edge features (self-loops
    get the mean of a node's in-edge features, as PyG's layer gives them). Layer-wise inference takes the
    softmax over each node's whole in-neighbourhood, across partitions."""

    layer_edges_per_chunk = 1 << 19  # the layer writes heads x channels per edge: a smaller chunk

    def __init__(
        self,
        in_dim: int,
        hidden: int,
        out_dim: int,
        num_layers: int = 2,
        *,
        dropout: float = 0.5,
        heads: int = 4,
        attn_dropout: float = 0.0,
        edge_dim: int | None = None,
    ):
        if hidden % heads:
            raise InputError(f"model 'gat': the hidden width ({hidden}) must be a multiple of the heads ({heads})")
        dims = widths(in_dim, hidden, out_dim, num_layers)
        convs = [
            GATConv(a, b // heads, heads=heads, dropout=attn_dropout, edge_dim=edge_dim)
            for a, b in zip(dims[:-2], dims[1:-1])
        ]
        convs.append(GATConv(dims[-2], dims[-1], heads=1, dropout=attn_dropout, edge_dim=edge_dim))
        super().__init__(convs, dropout, uses_edge_attr=edge_dim is not None)

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> GAT:
        return cls(
            spec.in_dim,
            spec.hidden,
            spec.out_dim,
            spec.num_layers,
            dropout=spec.dropout,
            heads=spec.heads,
            attn_dropout=spec.attn_dropout,
            edge_dim=spec.edge_dim,
        )

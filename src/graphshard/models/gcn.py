"""GCN (Kipf & Welling) over sampled mini-batches, built from PyG's ``GCNConv``."""

from __future__ import annotations

from torch_geometric.nn import GCNConv

from .spec import ModelSpec
from .stack import ConvStack, widths


class GCN(ConvStack):
    """``num_layers`` ``GCNConv`` layers (symmetric normalisation, self-loops). In training, a batch is
    normalised by the degrees within the sampled subgraph (as PyG's ``GCNConv`` on a loader batch);
    layer-wise inference uses the whole graph's degrees, as the layer over the whole graph does. Not
    trimmed by hop: a source's degree within the batch counts the edges of the last hop."""

    trims = False
    wants_degrees = True

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, *, dropout: float = 0.5):
        dims = widths(in_dim, hidden, out_dim, num_layers)
        super().__init__([GCNConv(a, b) for a, b in zip(dims[:-1], dims[1:])], dropout)

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> GCN:
        return cls(spec.in_dim, spec.hidden, spec.out_dim, spec.num_layers, dropout=spec.dropout)

"""Relational graph attention, as GraphStorm's RGAT: one PyG ``GATConv`` per relation (``heads`` heads,
attention dropout ``attn_dropout``), averaged per destination type (``HeteroConv(aggr="mean")``; see
:mod:`.rgcn` for why not summed), plus a root ``Linear`` of each node's own row per node type (GraphStorm's
self-loop weight; it carries the bias).

Each relation's attention is a softmax over a node's in-edges of that relation only, so a layer over
(sources, destinations, edges) that holds a destination's whole in-neighbourhood is exact. The GATs add no
self-loops: a relation is bipartite (its source and destination rows are not aligned, in layer-wise
inference nor between two node types), so a node's own row enters through the root term, which reads the
destination rows. Hidden layers concatenate their heads (``hidden // heads`` wide each); the last layer
averages them (``out_dim`` wide), as GAT's output layer does."""

from __future__ import annotations

from torch import nn
from torch_geometric.nn import GATConv

from ..graph import EType
from .rgcn import Relational
from .spec import ModelSpec


class RGAT(Relational):
    """Per layer, ``root_t(x_i) + sum_r GAT_r(x, N_r(i))`` for every node ``i`` of type ``t``; ReLU and dropout
    between layers (see the module docstring). ``hidden`` must be a multiple of ``heads``."""

    def __init__(
        self,
        in_dims: dict[str, int],
        etypes: list[EType],
        hidden: int,
        out_dim: int,
        *,
        num_layers: int = 2,
        dropout: float = 0.5,
        outputs: list[str] | None = None,
        heads: int = 4,
        attn_dropout: float = 0.0,
    ):
        if hidden % heads:
            raise ValueError(f"RGAT: hidden width {hidden} is not a multiple of the {heads} attention heads")
        self.heads, self.attn_dropout = heads, attn_dropout
        super().__init__(in_dims, etypes, hidden, out_dim, num_layers=num_layers, dropout=dropout, outputs=outputs)

    def relation(self, in_dim: int, out_dim: int, last: bool) -> nn.Module:
        width = out_dim if last else out_dim // self.heads
        return GATConv(
            (in_dim, in_dim),
            width,
            heads=self.heads,
            concat=not last,
            dropout=self.attn_dropout,
            add_self_loops=False,
            bias=False,
        )

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> RGAT:
        return cls(
            spec.in_dims,
            spec.etypes,
            spec.hidden,
            spec.out_dim,
            num_layers=spec.num_layers,
            dropout=spec.dropout,
            outputs=spec.outputs,
            heads=spec.heads,
            attn_dropout=spec.attn_dropout,
        )

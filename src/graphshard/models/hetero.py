"""Heterogeneous GraphSAGE (an R-GCN with mean aggregation per relation): one ``SAGEConv`` per edge
type, averaged over the relations that reach a node type, built from PyG's ``HeteroConv``.

Averaged, not summed: each relation's ``SAGEConv`` carries its own root (self) term and bias, so a sum
grows a type's representation with the number of relations reaching it (about sqrt(k) per layer for k
relations at initialisation). Link scores, dot products of two such outputs, then start with a spread of
about 10 on the generated MAG-like graph (0.27 averaged), the first Adam steps at lr 0.01 diverge
(loss 4-10) and training settles on constant scores (loss ln 2, AUC 0.5): this is why heterogeneous link
prediction learnt nothing before."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import cast

import torch
from torch import nn
from torch_geometric.nn import HeteroConv, SAGEConv

from ..graph import EType
from .aggregate import sage_rows
from .hetero_stack import HeteroStack, relations
from .spec import ModelSpec


class HeteroSAGE(HeteroStack):
    """Every node type's input (``in_dims[t]`` wide) is first projected to ``hidden``; then
    ``num_layers`` relation-wise SAGEConv layers. Node types that no edge type reaches keep a per-layer
    linear map of their own representation, so every type has a row in every layer.

    Only what the ``outputs`` types (all by default) depend on is built: the last layer has the relations
    into those types, each layer before it the relations into the types the next one reads (sources and
    destinations), and only those types are projected — so every parameter takes part in every step and
    DDP needs no search for unused ones. ``forward`` and trimming by hop are
    :class:`~.hetero_stack.HeteroStack`'s."""

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
    ):
        super().__init__(in_dims, etypes, hidden, num_layers=num_layers, dropout=dropout, outputs=outputs)
        reached = {et[2] for et in etypes}
        dims = [hidden] * num_layers + [out_dim]
        with warnings.catch_warnings():  # PyG warns of types no relation reaches: ``keep`` carries them
            warnings.filterwarnings("ignore", message="There exist node types")
            self.convs = nn.ModuleList(
                HeteroConv({et: SAGEConv((a, a), b) for et in rels}, aggr="mean")
                for (rels, _), a, b in zip(self.layer_plan, dims[:-1], dims[1:])
            )
        self.keep = nn.ModuleList(
            nn.ModuleDict({t: nn.Linear(a, b) for t in types if t not in reached})
            for (_, types), a, b in zip(self.layer_plan, dims[:-1], dims[1:])
        )

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> HeteroSAGE:
        return cls(
            spec.in_dims,
            spec.etypes,
            spec.hidden,
            spec.out_dim,
            num_layers=spec.num_layers,
            dropout=spec.dropout,
            outputs=spec.outputs,
        )

    def relations_of(self, i: int) -> Iterable[EType]:
        return relations(self.convs[i]).keys()

    def step(
        self, i: int, x: dict[str, torch.Tensor], edges: dict[EType, torch.Tensor], rows: dict[str, int]
    ) -> dict[str, torch.Tensor]:
        convs, kept = relations(self.convs[i]), cast(nn.ModuleDict, self.keep[i])  # keep: a ModuleDict per layer
        out = _mean_by_type((et[2], convs[et]((x[et[0]], x[et[2]][: rows[et[2]]]), ei)) for et, ei in edges.items())
        out.update({t: lin(x[t][: rows[t]]) for t, lin in kept.items()})
        return out

    def chunk_step(
        self, i: int, x_src: dict[str, torch.Tensor], x_dst: dict[str, torch.Tensor], edges: dict[EType, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """The relations into a type averaged (as ``HeteroConv(aggr="mean")`` does), types no relation
        reaches through their own linear map."""
        convs = relations(self.convs[i])  # relations not built are left out: nothing this model outputs reads them
        out = _mean_by_type(
            (et[2], sage_rows(convs[et], x_src[et[0]], x_dst[et[2]], ei)) for et, ei in edges.items() if et in convs
        )
        kept = cast(nn.ModuleDict, self.keep[i])  # keep: a ModuleDict per layer
        out.update({t: lin(x_dst[t]) for t, lin in kept.items() if t in x_dst})
        return out


def _mean_by_type(outputs: Iterable[tuple[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Each destination type's mean of the relation outputs into it (``HeteroConv(aggr="mean")``)."""
    grouped: dict[str, list[torch.Tensor]] = {}
    for t, v in outputs:
        grouped.setdefault(t, []).append(v)
    return {t: torch.stack(v).mean(0) for t, v in grouped.items()}

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
from typing import Protocol, cast

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import HeteroConv, SAGEConv

from ..graph import EType
from .aggregate import sage_rows
from .dropout import relu_dropout
from .spec import ModelSpec


class Relations(Protocol):
    """A PyG ``HeteroConv``'s ``convs``: its conv of every relation, keyed by edge type (PyG's ``ModuleDict``
    takes tuple keys)."""

    def keys(self) -> Iterable[EType]: ...

    def __getitem__(self, et: EType, /) -> nn.Module: ...

    def __contains__(self, et: object, /) -> bool: ...


def relations(conv: nn.Module) -> Relations:
    """The per-relation convs of ``conv``, a PyG ``HeteroConv``."""
    return cast(Relations, conv.convs)  # HeteroConv.convs (PyG is untyped; torch says Tensor | Module)


def project(lin: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``lin(x)``, also for a sparse COO ``x`` (bag-of-words rows: only their non-zeros are multiplied)."""
    if x.is_sparse:
        return torch.sparse.mm(x, lin.weight.t()) + lin.bias
    return lin(x)


class HeteroSAGE(nn.Module):
    """Every node type's input (``in_dims[t]`` wide) is first projected to ``hidden``; then
    ``num_layers`` relation-wise SAGEConv layers. Node types that no edge type reaches keep a per-layer
    linear map of their own representation, so every type has a row in every layer.

    Only what the ``outputs`` types (all by default) depend on is built: the last layer has the relations
    into those types, each layer before it the relations into the types the next one reads (sources and
    destinations), and only those types are projected — so every parameter takes part in every step and
    DDP needs no search for unused ones.

    ``forward(x_dict, edge_index_dict, hops)`` wants every node and edge type present (empty where a batch
    has none — see :class:`graphshard.train.inputs.ModelInputs`) and returns the ``outputs`` types. With
    ``hops = (num_sampled_nodes per type, num_sampled_edges per edge type)`` of a batch ordered by hop,
    layer ``i`` computes rows only for the nodes later layers need (hops ``0 .. L-1-i`` of each type) from
    the edges into them, and the output has rows for the seeds only, equal to the untrimmed ones."""

    def __init__(
        self,
        in_dims: dict[str, int],
        etypes: list[EType],
        hidden: int,
        out_dim: int,
        num_layers: int = 2,
        dropout: float = 0.5,
        outputs: list[str] | None = None,
    ):
        super().__init__()
        self.outputs = list(in_dims) if outputs is None else list(outputs)
        reached = {et[2] for et in etypes}
        layers, types = [], set(self.outputs)  # from the last layer back: relations built, types read
        for _ in range(num_layers):
            rels = [et for et in etypes if et[2] in types]
            layers.append((rels, sorted(t for t in types if t not in reached)))
            types = {et[0] for et in rels} | types
        layers.reverse()
        self.proj = nn.ModuleDict({t: nn.Linear(d, hidden) for t, d in in_dims.items() if t in types})
        dims = [hidden] * num_layers + [out_dim]
        with warnings.catch_warnings():  # PyG warns of types no relation reaches: ``keep`` carries them
            warnings.filterwarnings("ignore", message="There exist node types")
            self.convs = nn.ModuleList(
                HeteroConv({et: SAGEConv((a, a), b) for et in rels}, aggr="mean")
                for (rels, _), a, b in zip(layers, dims[:-1], dims[1:])
            )
        self.keep = nn.ModuleList(
            nn.ModuleDict({t: nn.Linear(a, b) for t in kept}) for (_, kept), a, b in zip(layers, dims[:-1], dims[1:])
        )
        self.dropout = dropout

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> HeteroSAGE:
        return cls(spec.in_dims, spec.etypes, spec.hidden, spec.out_dim, spec.num_layers, spec.dropout, spec.outputs)

    def forward(
        self, x_dict: dict[str, torch.Tensor], edge_index_dict: dict[EType, torch.Tensor], hops=None
    ) -> dict[str, torch.Tensor]:
        x = {t: project(cast(nn.Linear, lin), x_dict[t]) for t, lin in self.proj.items()}  # proj: Linear layers
        depth = len(self.convs)
        if hops is not None and any(len(n) != depth + 1 for n in hops[0].values()):
            hops = None  # sampled for another depth: nothing to trim by
        for i, (conv, keep) in enumerate(zip(self.convs, self.keep)):
            convs, kept = relations(conv), cast(nn.ModuleDict, keep)  # keep: a ModuleDict per layer
            if hops is None:  # every row and edge
                rows = {t: v.shape[0] for t, v in x.items()}
                rels = {et: edge_index_dict[et] for et in convs.keys()}
            else:  # drop the last i hops of edges and the last i + 1 hops of destinations
                nodes, edges = hops
                rows = {t: sum(nodes.get(t, [])[: depth - i]) for t in x}
                rels = {
                    et: edge_index_dict[et][:, : sum(edges.get(et, [])[: len(edges.get(et, [])) - i])]
                    for et in convs.keys()
                }
            out = _mean_by_type((et[2], convs[et]((x[et[0]], x[et[2]][: rows[et[2]]]), ei)) for et, ei in rels.items())
            out.update({t: lin(x[t][: rows[t]]) for t, lin in kept.items()})
            if i < depth - 1:
                out = {t: relu_dropout(v, self.dropout, self.training) for t, v in out.items()}
            x = out
        return {t: x[t] for t in self.outputs}

    # Layer-wise inference (see graphshard.infer): one layer at a time over (sources, destinations, edges).
    @property
    def num_layers(self) -> int:
        return len(self.convs)

    def layer_inputs(self, x: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {t: project(cast(nn.Linear, self.proj[t]), v) for t, v in x.items() if t in self.proj}  # Linear layers

    def layer(
        self, i: int, x_src: dict[str, torch.Tensor], x_dst: dict[str, torch.Tensor], edges: dict[EType, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Layer ``i`` for the destination rows of every type: the relations into a type averaged (as
        ``HeteroConv(aggr="mean")`` does), types no relation reaches through their own linear map."""
        convs = relations(self.convs[i])  # relations not built are left out: nothing this model outputs reads them
        out = _mean_by_type(
            (et[2], sage_rows(convs[et], x_src[et[0]], x_dst[et[2]], ei)) for et, ei in edges.items() if et in convs
        )
        kept = cast(nn.ModuleDict, self.keep[i])  # keep: a ModuleDict per layer
        out.update({t: lin(x_dst[t]) for t, lin in kept.items() if t in x_dst})
        return {t: F.relu(v) for t, v in out.items()} if i < len(self.convs) - 1 else out


def _mean_by_type(outputs: Iterable[tuple[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Each destination type's mean of the relation outputs into it (``HeteroConv(aggr="mean")``)."""
    grouped: dict[str, list[torch.Tensor]] = {}
    for t, v in outputs:
        grouped.setdefault(t, []).append(v)
    return {t: torch.stack(v).mean(0) for t, v in grouped.items()}

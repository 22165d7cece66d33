"""Relational GCN (Schlichtkrull et al.): a node's new row is the average over the relations built into its
type of the mean of its in-neighbours transformed by that relation's weight, plus its own row through a
root linear of its node type — PyG's ``RGCNConv(aggr="mean")`` with one root per node type, each relation
weight divided by the number of relations into the type.

Averaged, not summed (as :class:`~.hetero.HeteroSAGE` is, for the same reason): a sum grows a type's rows
with the number of relations reaching it, and on the generated MAG-like graph the link scores of summed
RGCN/RGAT (dot products of two such rows) start so spread that the first Adam steps diverge to constant
scores (loss ln 2, MRR of random scores); averaged, both learn. The two span the same functions.

Built as PyG's ``HeteroConv`` of one root-less, bias-free ``SAGEConv`` per relation (``W_r · mean(x_j)``,
the same as the mean of ``W_r x_j``) summed per destination type, plus a per-type root ``Linear`` (which
carries the bias). ``RGCNConv`` itself does not fit: it numbers every node in one index space, keeps one
root for all node types and needs a per-edge relation vector ``HeteroConv`` cannot pass. Each relation is
a mean over a node's in-edges of that relation and the root reads the destination's own row, so one
layer over (sources, destinations, edges) is exact for layer-wise inference.

The layer loop, trimming by hop and layer-wise inference are :class:`~.hetero_stack.HeteroStack`'s; this
module holds :class:`Relational`, the per-relation conv plus per-type root skeleton that
:class:`~graphshard.models.rgat.RGAT` reuses."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import cast

import torch
from torch import nn
from torch_geometric.nn import HeteroConv, SAGEConv

from ..graph import EType
from .aggregate import mean_matrix
from .hetero_stack import HeteroStack, compact, relations
from .spec import ModelSpec


class Relational(HeteroStack):
    """Input projection to ``hidden``, then ``num_layers`` layers each writing, for every type it writes,
    the average of one conv per relation into the type plus a root ``Linear`` of the type's own row (node types
    no relation reaches: the root alone). Only what the ``outputs`` types (all by default) depend on is
    built (see :func:`~.hetero_stack.plan`), so every parameter takes part in every step. Subclasses give the
    per-relation conv (:meth:`relation`) and may compute it faster where no gradient is wanted (:meth:`message`)."""

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
        dims = [hidden] * num_layers + [out_dim]
        last = [False] * (num_layers - 1) + [True]
        with warnings.catch_warnings():  # PyG warns of source-only types: the roots carry every written type
            warnings.filterwarnings("ignore", message="There exist node types")
            self.convs = nn.ModuleList(
                HeteroConv({et: self.relation(a, b, z) for et in rels}, aggr="mean")
                for (rels, _), a, b, z in zip(self.layer_plan, dims[:-1], dims[1:], last)
            )
        self.roots = nn.ModuleList(
            nn.ModuleDict({t: nn.Linear(a, b) for t in types})
            for (_, types), a, b in zip(self.layer_plan, dims[:-1], dims[1:])
        )

    def relation(self, in_dim: int, out_dim: int, last: bool) -> nn.Module:
        """The conv of one relation (``last``: in the last layer)."""
        raise NotImplementedError

    def message(self, conv: nn.Module, x_src: torch.Tensor, x_dst: torch.Tensor, ei: torch.Tensor) -> torch.Tensor:
        """One relation's contribution to its destinations: ``conv((x_src, x_dst), ei)``."""
        return conv((x_src, x_dst), ei)

    def combine(
        self, i: int, x_src: dict[str, torch.Tensor], x_dst: dict[str, torch.Tensor], edges: dict[EType, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Layer ``i`` before its activation, for the rows of ``x_dst`` of every type the layer writes: the
        relations are bipartite and the roots read ``x_dst``, so sources and destinations need not be aligned."""
        convs, roots = relations(self.convs[i]), cast(nn.ModuleDict, self.roots[i])  # roots: a ModuleDict per layer
        fan_in = {t: sum(et[2] == t for et in convs.keys()) for t in roots}  # relations built into each type
        out = {t: root(x_dst[t]) for t, root in roots.items() if t in x_dst}
        for et, ei in edges.items():
            if et in convs and et[2] in out:  # relations this model does not build: nothing it outputs reads them
                out[et[2]] = out[et[2]] + self.message(convs[et], x_src[et[0]], x_dst[et[2]], ei) / fan_in[et[2]]
        return out

    def relations_of(self, i: int) -> Iterable[EType]:
        return relations(self.convs[i]).keys()

    def step(
        self, i: int, x: dict[str, torch.Tensor], edges: dict[EType, torch.Tensor], rows: dict[str, int]
    ) -> dict[str, torch.Tensor]:
        return self.combine(i, x, {t: v[: rows[t]] for t, v in x.items()}, edges)

    def chunk_step(
        self, i: int, x_src: dict[str, torch.Tensor], x_dst: dict[str, torch.Tensor], edges: dict[EType, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        x_src, edges = compact(x_src, {et: ei for et, ei in edges.items() if et in relations(self.convs[i])})
        return self.combine(i, x_src, x_dst, edges)


class RGCN(Relational):
    """Relational GCN: per layer, ``root_t(x_i) + 1/R_t sum_r mean_{j in N_r(i)} W_r x_j`` for every node ``i``
    of type ``t`` reached by ``R_t`` relations (see the module docstring); ReLU and dropout between layers."""

    def relation(self, in_dim: int, out_dim: int, last: bool) -> nn.Module:
        return SAGEConv((in_dim, in_dim), out_dim, root_weight=False, bias=False)

    def message(self, conv: nn.Module, x_src: torch.Tensor, x_dst: torch.Tensor, ei: torch.Tensor) -> torch.Tensor:
        """``W_r · mean(x_j)``; where the sources need no gradient, the mean is one CSR product (outside
        autograd), and without autograd a narrowing ``W_r`` is applied first (the same sum, fewer columns)."""
        if x_src.requires_grad:
            return conv((x_src, x_dst), ei)
        mean = mean_matrix(ei, x_src.shape[0], x_dst.shape[0])
        lin = cast(SAGEConv, conv).lin_l  # RGCN's relations are SAGEConvs (see relation)
        if not torch.is_grad_enabled() and lin.out_channels < lin.in_channels:
            return torch.sparse.mm(mean, lin(x_src))
        with torch.no_grad():
            agg = torch.sparse.mm(mean, x_src)
        return lin(agg)

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> RGCN:
        return cls(
            spec.in_dims,
            spec.etypes,
            spec.hidden,
            spec.out_dim,
            num_layers=spec.num_layers,
            dropout=spec.dropout,
            outputs=spec.outputs,
        )

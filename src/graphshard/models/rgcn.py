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

This module also holds what the relational models share: the layer plan from the outputs back
(:func:`plan`), trimming by sampled hop (:func:`hop_rows`) and :class:`Relational`, the per-relation conv
plus per-type root skeleton that :class:`~graphshard.models.rgat.RGAT` reuses."""

from __future__ import annotations

import warnings
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import HeteroConv, SAGEConv

from ..graph import EType
from .aggregate import mean_matrix
from .dropout import relu_dropout
from .hetero import project, relations
from .spec import ModelSpec

Hops = tuple[dict[str, list[int]], dict[EType, list[int]]]


def plan(
    etypes: list[EType], outputs: list[str], num_layers: int
) -> tuple[list[tuple[list[EType], list[str]]], set[str]]:
    """Per layer, first to last: the relations it builds (those into the types it writes) and the types it
    writes (the outputs for the last layer, the types the next layer reads before it); and the types the
    first layer reads (the only ones to project). Built from the last layer back."""
    layers, types = [], set(outputs)
    for _ in range(num_layers):
        rels = [et for et in etypes if et[2] in types]
        layers.append((rels, sorted(types)))
        types = types | {et[0] for et in rels}
    layers.reverse()
    return layers, types


def usable_hops(hops: Hops | None, depth: int) -> Hops | None:
    """``hops`` if it was sampled for ``depth`` layers (it then tells what to trim), else None."""
    if hops is not None and any(len(n) != depth + 1 for n in hops[0].values()):
        return None
    return hops


def hop_rows(
    hops: Hops | None, i: int, depth: int, x: dict[str, torch.Tensor], edge_index_dict: dict[EType, torch.Tensor], rels
) -> tuple[dict[str, int], dict[EType, torch.Tensor]]:
    """Layer ``i``'s destination rows per type (the first ones of ``x[t]``) and its edges: all of them
    without ``hops``; else hops ``0 .. depth-1-i`` of nodes and all but the last ``i`` hops of edges (those
    into the nodes kept), in a batch ordered by hop."""
    if hops is None:
        return {t: v.shape[0] for t, v in x.items()}, {et: edge_index_dict[et] for et in rels}
    nodes, edges = hops
    rows = {t: sum(nodes.get(t, [])[: depth - i]) for t in x}
    kept = {et: sum(edges.get(et, [])[: len(edges.get(et, [])) - i]) for et in rels}
    return rows, {et: edge_index_dict[et][:, : kept[et]] for et in rels}


def compact(
    x_src: dict[str, torch.Tensor], edges: dict[EType, torch.Tensor]
) -> tuple[dict[str, torch.Tensor], dict[EType, torch.Tensor]]:
    """The source rows ``edges`` read, each once, per type (none of the types they do not read), and the
    edges renumbered to them: a layer-wise chunk then transforms its own sources only, not every row its
    rank holds (GATConv and HGTConv transform all the source rows they are given)."""
    rows = {t: v[:0] for t, v in x_src.items()}
    out: dict[EType, torch.Tensor] = {}
    for t in {et[0] for et in edges}:
        ets = [et for et in edges if et[0] == t]
        used, at = torch.unique(torch.cat([edges[et][0] for et in ets]), return_inverse=True)
        rows[t] = x_src[t][used]
        for et, src in zip(ets, at.split([edges[et].shape[1] for et in ets])):
            out[et] = torch.stack([src, edges[et][1]])
    return rows, out


class Relational(nn.Module):
    """Input projection to ``hidden``, then ``num_layers`` layers each writing, for every type it writes,
    the average of one conv per relation into the type plus a root ``Linear`` of the type's own row (node types
    no relation reaches: the root alone). Only what the ``outputs`` types (all by default) depend on is
    built (see :func:`plan`), so every parameter takes part in every step. Subclasses give the per-relation
    conv (:meth:`relation`) and may compute it faster where no gradient is wanted (:meth:`message`)."""

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
        layers, inputs = plan(etypes, self.outputs, num_layers)
        self.proj = nn.ModuleDict({t: nn.Linear(d, hidden) for t, d in in_dims.items() if t in inputs})
        dims = [hidden] * num_layers + [out_dim]
        last = [False] * (num_layers - 1) + [True]
        with warnings.catch_warnings():  # PyG warns of source-only types: the roots carry every written type
            warnings.filterwarnings("ignore", message="There exist node types")
            self.convs = nn.ModuleList(
                HeteroConv({et: self.relation(a, b, z) for et in rels}, aggr="mean")
                for (rels, _), a, b, z in zip(layers, dims[:-1], dims[1:], last)
            )
        self.roots = nn.ModuleList(
            nn.ModuleDict({t: nn.Linear(a, b) for t in types}) for (_, types), a, b in zip(layers, dims[:-1], dims[1:])
        )
        self.dropout = dropout

    def relation(self, in_dim: int, out_dim: int, last: bool) -> nn.Module:
        """The conv of one relation (``last``: in the last layer)."""
        raise NotImplementedError

    def message(self, conv: nn.Module, x_src: torch.Tensor, x_dst: torch.Tensor, ei: torch.Tensor) -> torch.Tensor:
        """One relation's contribution to its destinations: ``conv((x_src, x_dst), ei)``."""
        return conv((x_src, x_dst), ei)

    def step(
        self, i: int, x_src: dict[str, torch.Tensor], x_dst: dict[str, torch.Tensor], edges: dict[EType, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Layer ``i`` before its activation, for the rows of ``x_dst`` of every type the layer writes."""
        convs, roots = relations(self.convs[i]), cast(nn.ModuleDict, self.roots[i])  # roots: a ModuleDict per layer
        fan_in = {t: sum(et[2] == t for et in convs.keys()) for t in roots}  # relations built into each type
        out = {t: root(x_dst[t]) for t, root in roots.items() if t in x_dst}
        for et, ei in edges.items():
            if et in convs and et[2] in out:  # relations this model does not build: nothing it outputs reads them
                out[et[2]] = out[et[2]] + self.message(convs[et], x_src[et[0]], x_dst[et[2]], ei) / fan_in[et[2]]
        return out

    def forward(
        self, x_dict: dict[str, torch.Tensor], edge_index_dict: dict[EType, torch.Tensor], hops: Hops | None = None
    ) -> dict[str, torch.Tensor]:
        """The ``outputs`` types' rows: all of them, or the seeds' only with ``hops`` (equal either way)."""
        x = self.layer_inputs({t: x_dict[t] for t in self.proj})
        depth = len(self.convs)
        hops = usable_hops(hops, depth)
        for i in range(depth):
            rows, edges = hop_rows(hops, i, depth, x, edge_index_dict, relations(self.convs[i]).keys())
            x = self.step(i, x, {t: v[: rows[t]] for t, v in x.items()}, edges)
            if i < depth - 1:
                x = {t: relu_dropout(v, self.dropout, self.training) for t, v in x.items()}
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
        """Layer ``i`` (activated but the last) for the rows of ``x_dst``: sources ``x_src`` and destinations
        need not be aligned, as the relations are bipartite and the roots read ``x_dst``."""
        x_src, edges = compact(x_src, {et: ei for et, ei in edges.items() if et in relations(self.convs[i])})
        out = self.step(i, x_src, x_dst, edges)
        return {t: F.relu(v) for t, v in out.items()} if i < len(self.convs) - 1 else out


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
        return cls(spec.in_dims, spec.etypes, spec.hidden, spec.out_dim, spec.num_layers, spec.dropout, spec.outputs)

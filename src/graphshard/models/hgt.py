"""Heterogeneous Graph Transformer (Hu et al.) on PyG's ``HGTConv``: per layer, keys, queries and values per
node type, relation-specific key/value maps and priors, one attention softmax over all of a node's incoming
edges across relations, a per-type output map and a learnt skip (gate) to the node's own row.

``HGTConv`` takes one dictionary of rows per type, sources and destinations alike. A training batch is
ordered by hop, so the destinations a layer needs are the first rows of each type: the conv runs over all
rows with the edges into those and its output is cut to them. In layer-wise inference the source and
destination rows are not aligned: each type's destination rows are put before its source rows, source
indices shifted past them, and the first rows kept — the destinations then read their own rows in the skip
term and attend over their whole in-neighbourhood, which one call holds: exact.

Attention dropout (``attn_dropout``, which ``HGTConv`` lacks) drops attention weights after the softmax,
as ``GATConv`` does. Hidden layers are ``hidden`` wide (a multiple of ``heads``); the last one maps each
output type through a ``Linear`` to ``out_dim``. Node types no relation reaches keep a per-layer linear of
their own row. Only what the ``outputs`` types depend on is built, and each ``HGTConv``'s output maps and
skips of types it only reads from are dropped, so every parameter takes part in every step."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import HGTConv
from torch_geometric.utils import softmax

from ..graph import EType
from .hetero_stack import HeteroStack, compact
from .spec import ModelSpec

_NO_EDGES = torch.zeros((2, 0), dtype=torch.long)


class _HGTConv(HGTConv):
    """``HGTConv`` with dropout on its attention weights, and without the output maps and skips of the
    node types no relation of it reaches (it never uses them)."""

    def __init__(self, width: int, rels: list[EType], types: list[str], heads: int, *, attn_dropout: float):
        super().__init__(width, width, (types, rels), heads=heads)
        self.attn_dropout = attn_dropout
        for t in types:
            if t not in self.dst_node_types:
                del self.out_lin.lins[t]
                del self.skip[t]

    def message(
        self,
        k_j: torch.Tensor,
        q_i: torch.Tensor,
        v_j: torch.Tensor,
        edge_attr: torch.Tensor,
        index: torch.Tensor,
        ptr: torch.Tensor | None,
        size_i: int | None,
    ) -> torch.Tensor:
        alpha = (q_i * k_j).sum(dim=-1) * edge_attr / math.sqrt(q_i.size(-1))
        alpha = F.dropout(softmax(alpha, index, ptr, size_i), self.attn_dropout, self.training)
        return (v_j * alpha.unsqueeze(-1)).view(-1, self.out_channels)


class HGT(HeteroStack):
    """Input projection to ``hidden``, ``num_layers`` HGT layers (ReLU and dropout between them), a
    per-type ``Linear`` to ``out_dim`` after the last (see the module docstring)."""

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
            raise ValueError(f"HGT: hidden width {hidden} is not a multiple of the {heads} attention heads")
        super().__init__(in_dims, etypes, hidden, num_layers=num_layers, dropout=dropout, outputs=outputs)
        reached = {et[2] for et in etypes}
        self.convs = nn.ModuleDict()  # by layer index: layers no relation of which is needed have none
        for i, (rels, types) in enumerate(self.layer_plan):
            if rels:
                read = sorted(set(types) | {et[0] for et in rels})
                self.convs[str(i)] = _HGTConv(hidden, rels, read, heads, attn_dropout=attn_dropout)
        widths = [hidden] * (num_layers - 1) + [out_dim]
        self.keep = nn.ModuleList(
            nn.ModuleDict({t: nn.Linear(hidden, b) for t in types if t not in reached})
            for (_, types), b in zip(self.layer_plan, widths)
        )
        self.head = nn.ModuleDict({t: nn.Linear(hidden, out_dim) for t in self.outputs if t in reached})

    def _conv(self, i: int) -> _HGTConv | None:
        """Layer ``i``'s conv (None: no relation of the layer is needed)."""
        return cast(_HGTConv, self.convs[str(i)]) if str(i) in self.convs else None  # convs holds _HGTConvs only

    def relations_of(self, i: int) -> Iterable[EType]:
        conv = self._conv(i)
        return conv.edge_types if conv is not None else []

    def step(
        self, i: int, x: dict[str, torch.Tensor], edges: dict[EType, torch.Tensor], rows: dict[str, int]
    ) -> dict[str, torch.Tensor]:
        keep = cast(nn.ModuleDict, self.keep[i])  # keep: a ModuleDict per layer
        out = {t: lin(x[t][: rows[t]]) for t, lin in keep.items() if t in x}
        conv = self._conv(i)
        if conv is not None:
            none = _NO_EDGES.to(next(iter(x.values())).device)
            h = conv({t: x[t] for t in conv.node_types}, {et: edges.get(et, none) for et in conv.edge_types})
            last = i == self.num_layers - 1
            out.update({t: self.head[t](v[: rows[t]]) if last else v[: rows[t]] for t, v in h.items()})
        return out

    def chunk_step(
        self, i: int, x_src: dict[str, torch.Tensor], x_dst: dict[str, torch.Tensor], edges: dict[EType, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Each type's destination rows go before the source rows the edges read, and the source indices past
        them: then :meth:`step` over one index space per type."""
        x_src, edges = compact(x_src, {et: ei for et, ei in edges.items() if et in self.relations_of(i)})
        rows = {t: v.shape[0] for t, v in x_dst.items()}
        x = {t: torch.cat([v, x_src[t]]) if t in x_src else v for t, v in x_dst.items()}
        x.update({t: v for t, v in x_src.items() if t not in x})
        shift = {
            et: torch.tensor([[rows.get(et[0], 0)], [0]], dtype=ei.dtype, device=ei.device) for et, ei in edges.items()
        }
        return self.step(i, x, {et: ei + shift[et] for et, ei in edges.items()}, {**dict.fromkeys(x, 0), **rows})

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> HGT:
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

"""Model factories for ``--model tests.train.custom_factories:NAME``: the user's own models, good and bad."""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric.nn import GAT, GCN, GraphSAGE, SAGEConv

from graphshard.models import ModelSpec


def pyg_sage(spec: ModelSpec) -> nn.Module:
    """PyG's own GraphSAGE model (a BasicGNN: layer-wise inference through graphshard's adapter)."""
    return GraphSAGE(spec.in_dim, spec.hidden, spec.num_layers, spec.out_dim, dropout=spec.dropout)


def pyg_gcn(spec: ModelSpec) -> nn.Module:
    return GCN(spec.in_dim, spec.hidden, spec.num_layers, spec.out_dim)


def pyg_gat(spec: ModelSpec) -> nn.Module:
    return GAT(spec.in_dim, spec.hidden, spec.num_layers, spec.out_dim, heads=2)


class OnBatch(nn.Module):
    """A model that takes the PyG batch (no layer-wise protocol: evaluated on sampled full neighbourhoods)."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.conv1, self.conv2 = SAGEConv(spec.in_dim, spec.hidden), SAGEConv(spec.hidden, spec.out_dim)
        self.unused = nn.Linear(3, 3)  # never called: DDP must be told to look for unused parameters

    def forward(self, batch):
        return self.conv2(torch.relu(self.conv1(batch.x, batch.edge_index)), batch.edge_index)


def on_batch(spec: ModelSpec) -> nn.Module:
    return OnBatch(spec)


class Constant(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.rows = nn.Parameter(torch.zeros(1, spec.out_dim))

    def forward(self, x, edge_index):
        return self.rows.expand(x.shape[0], -1)


def constant(spec: ModelSpec) -> nn.Module:
    """An output that ignores the batch."""
    return Constant(spec)


def wrong_width(spec: ModelSpec) -> nn.Module:
    """One output column too many."""
    return GCN(spec.in_dim, spec.hidden, spec.num_layers, spec.out_dim + 1)


def not_a_module(spec: ModelSpec) -> object:
    return "a string"

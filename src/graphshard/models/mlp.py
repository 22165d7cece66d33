"""A features-only baseline: an MLP on the seed nodes' own inputs, ignoring the graph."""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from ..errors import InputError
from .contract import LayerwiseModel
from .dropout import relu_dropout
from .spec import ModelSpec


class MLP(nn.Module):
    """``num_layers`` linear layers (ReLU + dropout between them). ``forward`` takes the same arguments as
    the GNNs and ignores the edges; with dictionaries (heterogeneous) it maps only ``target``'s rows."""

    # the layer-wise contract (graphshard.models.contract.LayerwiseModel): the edges are ignored
    layerwise = True
    layer_context = False
    wants_degrees = False
    uses_edge_attr = False
    layer_edges_per_chunk: int | None = None

    def __init__(
        self,
        in_dim: int,
        hidden: int,
        out_dim: int,
        num_layers: int = 2,
        *,
        dropout: float = 0.5,
        target: str | None = None,
    ):
        super().__init__()
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        self.lins = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout, self.target = dropout, target

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> MLP:
        if len(set(spec.outputs)) > 1:
            raise InputError(f"model 'mlp' maps one node type, not {spec.outputs}")
        return cls(
            spec.in_dim,
            spec.hidden,
            spec.out_dim,
            spec.num_layers,
            dropout=spec.dropout,
            target=spec.target if spec.hetero else None,
        )

    def forward(self, x, edge_index=None, hops=None):
        if isinstance(x, dict):
            return {self.target: self.forward(x[self.target])}
        for i, lin in enumerate(self.lins):
            x = lin(x)
            if i < len(self.lins) - 1:
                x = relu_dropout(x, self.dropout, self.training)
        return x

    # Layer-wise inference (see graphshard.infer): the edges are ignored.
    @property
    def num_layers(self) -> int:
        return len(self.lins)

    def layer_inputs(self, x: dict) -> dict:
        return x

    def layer(self, i: int, x_src: dict, x_dst: dict, edges: dict) -> dict:
        types = [self.target] if self.target is not None else list(x_dst)
        out = {t: self.lins[i](x_dst[t]) for t in types if t in x_dst}
        return {t: F.relu(v) for t, v in out.items()} if i < len(self.lins) - 1 else out


_MEETS_CONTRACT: type[LayerwiseModel] = MLP  # mypy checks that MLP meets the layer-wise contract

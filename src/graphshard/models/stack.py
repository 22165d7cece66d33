"""The shape every built-in homogeneous GNN shares: ``num_layers`` PyG convolutions with ReLU + dropout
between them, the batch's edge features passed to layers that read them, and layer-wise inference through
:func:`~.conv_rows.conv_rows` (the :class:`~.contract.LayerwiseModel` contract; :class:`~.hetero_stack.HeteroStack`
is its heterogeneous sibling)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..graph import EType
from .contract import LayerwiseModel
from .conv_rows import conv_rows
from .dropout import relu_dropout
from .layer_context import LayerContext

Hops = tuple[list[int], list[int]]


class ConvStack(nn.Module):
    """``forward(x, edge_index, hops=None, edge_attr=None)`` returns one row per node (the first
    ``batch_size`` rows of a mini-batch are its seeds). Where the layers take ``(x_src, x_dst)`` pairs
    (``trims``), ``hops`` (nodes and edges sampled per hop, ordered by hop) trims each layer to the rows
    later layers need, as :class:`~.sage.GraphSAGE` does; the seeds' rows are the same either way."""

    trims = True
    # the layer-wise contract (graphshard.models.contract.LayerwiseModel)
    layerwise = True
    layer_context = True  # layer-wise inference passes a LayerContext
    wants_degrees = False  # ... with the nodes' in-degrees
    uses_edge_attr = False  # ... with the chunk's edge features (set per instance)
    layer_edges_per_chunk: int | None = None  # the planner's chunk

    def __init__(self, convs: list[nn.Module], dropout: float, uses_edge_attr: bool = False):
        super().__init__()
        self.convs = nn.ModuleList(convs)
        self.dropout, self.uses_edge_attr = dropout, uses_edge_attr

    def _call(
        self,
        conv: nn.Module,
        x: torch.Tensor,
        x_dst: torch.Tensor | None,
        edge_index: torch.Tensor,
        *,
        edge_attr: torch.Tensor | None,
    ) -> torch.Tensor:
        extra = {"edge_attr": edge_attr} if self.uses_edge_attr and edge_attr is not None else {}
        return conv(x if x_dst is None else (x, x_dst), edge_index, **extra)

    def forward(
        self, x: torch.Tensor, edge_index: torch.Tensor, hops: Hops | None = None, edge_attr: torch.Tensor | None = None
    ) -> torch.Tensor:
        depth = len(self.convs)
        if not self.trims or (hops is not None and len(hops[0]) != depth + 1):
            hops = None  # sampled for another depth: nothing to trim by
        for i, conv in enumerate(self.convs):
            if hops is None:
                x = self._call(conv, x, None, edge_index, edge_attr=edge_attr)
            else:  # drop the last i hops of edges and the last i + 1 hops of destinations
                rows, edges = sum(hops[0][: depth - i]), sum(hops[1][: len(hops[1]) - i])
                attr = None if edge_attr is None else edge_attr[:edges]
                x = self._call(conv, x, x[:rows], edge_index[:, :edges], edge_attr=attr)
            if i < depth - 1:
                x = relu_dropout(x, self.dropout, self.training)
        return x

    # Layer-wise inference (see graphshard.infer): one layer at a time over (sources, destinations, edges).
    @property
    def num_layers(self) -> int:
        return len(self.convs)

    def layer_inputs(self, x: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return x

    def layer(
        self,
        i: int,
        x_src: dict[str, torch.Tensor],
        x_dst: dict[str, torch.Tensor],
        edges: dict[EType, torch.Tensor],
        *,
        context: LayerContext,
    ) -> dict[str, torch.Tensor]:
        """Layer ``i`` for the destination rows (``edges``: source positions, destination positions)."""
        (t,) = x_dst
        et = next(iter(edges), None)
        ei = edges[et] if et is not None else torch.zeros((2, 0), dtype=torch.long, device=x_dst[t].device)
        attr = context.edge_attr.get(et) if self.uses_edge_attr and et is not None else None
        out = conv_rows(self.convs[i], t, x_src[t], x_dst[t], edges=ei, ctx=context, edge_attr=attr)
        return {t: F.relu(out) if i < len(self.convs) - 1 else out}


_MEETS_CONTRACT: type[LayerwiseModel] = ConvStack  # mypy checks that ConvStack meets the layer-wise contract


def widths(in_dim: int, hidden: int, out_dim: int, num_layers: int) -> list[int]:
    """Input width, then the output width of every layer."""
    return [in_dim] + [hidden] * (num_layers - 1) + [out_dim]

"""What layer-wise inference tells a model's ``layer`` about one chunk of destinations, beyond the rows and
edges: where each destination's own row is among the sources, the nodes' in-degrees over the whole graph
(normalisations such as GCN's read the sources' degrees, which a chunk's edges do not show) and the edges'
features. A model asks for it by setting ``layer_context = True`` (see :mod:`graphshard.infer.layerwise`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..graph import EType


@dataclass
class LayerContext:
    """Per node type: ``dst_in_src[t][j]`` is the position among ``x_src[t]`` of destination ``j``'s own row;
    ``src_degree[t]``/``dst_degree[t]`` the in-degrees (self-loops not counted, every edge type summed) of
    the rows of ``x_src[t]``/``x_dst[t]`` (empty when the model does not ask for them, ``wants_degrees``);
    ``edge_attr[et]`` the feature rows of the chunk's edges of ``et``, in ``edges[et]`` order (when the run
    has edge features)."""

    dst_in_src: dict[str, torch.Tensor]
    src_degree: dict[str, torch.Tensor] = field(default_factory=dict)
    dst_degree: dict[str, torch.Tensor] = field(default_factory=dict)
    edge_attr: dict[EType, torch.Tensor] = field(default_factory=dict)

    def without_self_loops(self, t: str, edges: torch.Tensor) -> torch.Tensor:
        """The positions (into ``edges``' columns) of the edges of destinations of type ``t`` that are not
        self-loops (a node's edge to itself: its source row is its own)."""
        return torch.nonzero(edges[0] != self.dst_in_src[t][edges[1]]).view(-1)

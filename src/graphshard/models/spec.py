"""What a model is built for: one small record handed to every model factory, built-in or the user's."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from ..graph import EType


@dataclass(frozen=True)
class ModelSpec:
    """The sizes and types a model is built for.

    ``in_dims``: input width of every node type (feature width, or the width of the learnt embeddings of a
    type without features); ``out_dim``: output width of the ``outputs`` node types (the types the loss
    reads: the target type of node classification, both ends of the predicted edge type for links);
    ``edge_dims``: width of the edge features of the edge types that carry the run's edge feature (empty:
    the model gets none); ``options``: the run's :class:`~graphshard.tasks.options.TrainOptions` (or None).
    """

    in_dims: dict[str, int]
    out_dim: int
    ntypes: list[str]
    etypes: list[EType]
    _: KW_ONLY
    outputs: list[str]
    hidden: int = 64
    num_layers: int = 2
    dropout: float = 0.5
    heads: int = 4
    attn_dropout: float = 0.0
    edge_dims: dict[EType, int] = field(default_factory=dict)
    options: Any = None

    @property
    def hetero(self) -> bool:
        """Several node or edge types (models take dictionaries keyed by type)."""
        return len(self.ntypes) > 1 or len(self.etypes) > 1

    @property
    def target(self) -> str:
        """The first output type (the only one of node classification)."""
        return self.outputs[0]

    @property
    def in_dim(self) -> int:
        """Input width of the (first) output type: a homogeneous graph's only one."""
        return self.in_dims[self.target]

    @property
    def edge_dim(self) -> int | None:
        """Edge feature width of a homogeneous graph's edges, None without edge features."""
        return next(iter(self.edge_dims.values()), None) if self.edge_dims else None

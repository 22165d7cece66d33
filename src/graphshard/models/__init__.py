"""GNN models for training on sampled mini-batches."""

from .sage import GraphSAGE

__all__ = ["GraphSAGE"]

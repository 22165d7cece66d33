"""GNN models for training on sampled mini-batches, and link-prediction decoders."""

from .hetero import HeteroSAGE
from .link import DotDecoder, LinkModel, MLPDecoder
from .mlp import MLP
from .sage import GraphSAGE

__all__ = ["DotDecoder", "GraphSAGE", "HeteroSAGE", "LinkModel", "MLP", "MLPDecoder"]

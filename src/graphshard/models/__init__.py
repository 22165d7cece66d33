"""GNN models for training on sampled mini-batches, and link-prediction decoders."""

from .hetero import HeteroSAGE
from .link import DotDecoder, LinkModel, MLPDecoder
from .mlp import MLP
from .gat import GAT
from .gcn import GCN
from .gin import GIN
from .sage import GraphSAGE

__all__ = ["DotDecoder", "GAT", "GCN", "GIN", "GraphSAGE", "HeteroSAGE", "LinkModel", "MLP", "MLPDecoder"]

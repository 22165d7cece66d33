"""GNN models for training on sampled mini-batches, and link-prediction decoders."""

from .hetero import HeteroSAGE
from .hgt import HGT
from .link import DotDecoder, LinkModel, MLPDecoder
from .mlp import MLP
from .gat import GAT
from .gcn import GCN
from .gin import GIN
from .rgat import RGAT
from .rgcn import RGCN
from .sage import GraphSAGE
from .spec import ModelSpec

__all__ = ["DotDecoder", "GAT", "GCN", "GIN", "GraphSAGE", "HGT", "HeteroSAGE", "LinkModel", "MLP", "MLPDecoder",
           "ModelSpec", "RGAT", "RGCN"]

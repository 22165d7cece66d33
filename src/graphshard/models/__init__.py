"""GNN models for training on sampled mini-batches, and the decoders of link prediction and edge tasks. Names
are imported on first use: the ``--model`` names (:mod:`.registry`) are read by every command line, the models
themselves (PyG's layers) only by training and inference. :class:`LayerwiseModel` (:mod:`.contract`) is the
contract a model meets for layer-wise inference."""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "ConcatDecoder": "edge",
    "DistMultDecoder": "link",
    "DotDecoder": "link",
    "EdgeDistMultDecoder": "edge",
    "EdgeDotDecoder": "edge",
    "EdgeModel": "edge",
    "LinkModel": "link",
    "MLPDecoder": "link",
    "GAT": "gat",
    "GCN": "gcn",
    "GIN": "gin",
    "GraphSAGE": "sage",
    "HGT": "hgt",
    "HeteroSAGE": "hetero",
    "LayerwiseModel": "contract",
    "MLP": "mlp",
    "ModelSpec": "spec",
    "RGAT": "rgat",
    "RGCN": "rgcn",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'graphshard.models' has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)

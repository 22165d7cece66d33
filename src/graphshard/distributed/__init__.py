"""Distributed runtime (like ``torch.distributed``): launch and session, DistGraph, DistTensor/DistEmbedding,
work split, distributed sampling and loaders. Names are imported on first use (torch is heavy)."""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "session": "runtime",
    "Session": "runtime",
    "DistError": "context",
    "DistContext": "context",
    "DistGraph": "graph",
    "DistTensor": "tensor",
    "DistEmbedding": "embedding",
    "SparseAdagrad": "embedding",
    "node_split": "split",
    "edge_split": "split",
    "DistNeighborSampler": "sampler",
    "DistFeatureStore": "feature",
    "DistNeighborLoader": "loader",
    "DistLinkNeighborLoader": "loader",
    "launch": "launcher",
    "run_script": "launcher",
    "LocalFeatureStore": "local_store",
    "LocalGraphStore": "graph_store",
    "ReadOnlyStoreError": "store_base",
    "FeatureCache": "cache",
    "build_cache": "cache",
    "build_device_cache": "device_cache",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'graphshard.distributed' has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)

"""Distributed runtime (like ``torch.distributed``): launch and session, DistGraph, DistTensor/DistEmbedding,
work split, distributed sampling and loaders. Names are imported on first use (torch is heavy)."""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "session": "runtime.session",
    "Session": "runtime.session",
    "DistError": "ranks.context",
    "DistContext": "ranks.context",
    "DistGraph": "runtime.graph",
    "DistTensor": "remote.tensor",
    "DistEmbedding": "remote.embedding",
    "SparseAdagrad": "remote.embedding",
    "node_split": "runtime.split",
    "edge_split": "runtime.split",
    "DistNeighborSampler": "remote.sampler",
    "DistFeatureStore": "remote.feature",
    "DistNeighborLoader": "loaders.loader",
    "DistLinkNeighborLoader": "loaders.loader",
    "launch": "ranks.launcher",
    "run_script": "ranks.launcher",
    "LocalFeatureStore": "stores.local",
    "LocalGraphStore": "stores.graph",
    "ReadOnlyStoreError": "stores.base",
    "FeatureCache": "remote.cache",
    "build_cache": "remote.cache",
    "build_device_cache": "remote.device_cache",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'graphshard.distributed' has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)

"""graphshard: partition graphs for distributed GNN training, and train on the partitions.

Names are imported on first use, so ``import graphshard`` (and the partitioning path) does not
load PyTorch; loading partitions and the partition book do.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "FormatError": "errors",
    "GraphshardError": "errors",
    "IDRangeError": "errors",
    "InputError": "errors",
    "WriteError": "errors",
    "Graph": "graph",
    "IDConverter": "ids",
    "RangePartitionBook": "book",
    "Partition": "format.load",
    "PartitionGraph": "format.load",
    "load_partition": "format.load",
    "load_partition_book": "format.load",
    "load_partition_feats": "format.load",
    "partition_graph": "partition.api",
}
# Subpackages reachable as attributes (``gs.distributed.DistGraph``) without importing them by name.
_SUBMODULES = {
    "book",
    "chunked",
    "datasets",
    "distributed",
    "format",
    "graph",
    "ids",
    "models",
    "partition",
    "pipeline",
    "sampling",
    "stats",
    "train",
}
__all__ = sorted(_EXPORTS)


def _version() -> str:
    """The installed package's version. pyproject.toml is the one place it is written; installing graphshard
    (editable or not) records it in the package metadata, read here on first use of ``__version__``. A source
    tree on ``sys.path`` that was never installed has no metadata, hence no version: ``0+unknown``."""
    from importlib import metadata

    try:
        return metadata.version("graphshard")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = version = _version()
        return version
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name not in _EXPORTS:
        raise AttributeError(f"module 'graphshard' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"__version__", *__all__})

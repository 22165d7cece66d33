"""Distributed training: options, the per-rank loop, checkpoints, the entry point, and every node's output
from a checkpoint (``graphshard embed``). Names are imported on first use: every command line reads the
options, only training needs the models and the runtime."""

from importlib import import_module
from typing import Any

_EXPORTS = {"TrainOptions": "options", "embed": "checkpoint_embed", "train": "run"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'graphshard.train' has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)

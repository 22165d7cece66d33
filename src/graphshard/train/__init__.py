"""The commands that start runs: ``graphshard train`` (the entry point: data resolved and checked, the memory
guards, ranks launched, the report) and ``graphshard embed`` (every node's output from a checkpoint). What the
ranks run — options, tasks, the loop, checkpoints — lives in :mod:`graphshard.tasks`. Names are imported on
first use: every command line reads the options, only training needs the models and the runtime."""

from importlib import import_module
from typing import Any

_EXPORTS = {"TrainOptions": ".tasks.options", "embed": "checkpoint_embed", "train": "run"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'graphshard.train' has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)

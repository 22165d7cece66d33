"""Distributed training: options, the per-rank loop, checkpoints, and the entry point."""

from .options import TrainOptions
from .run import train

__all__ = ["TrainOptions", "train"]

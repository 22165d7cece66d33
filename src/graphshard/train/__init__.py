"""Distributed training: options, the per-rank loop, checkpoints, the entry point, and every node's output
from a checkpoint (``graphshard embed``)."""

from .embed import embed
from .options import TrainOptions
from .run import train

__all__ = ["TrainOptions", "embed", "train"]

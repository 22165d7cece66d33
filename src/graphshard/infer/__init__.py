"""Inference over a partitioned graph: every node's output, one layer at a time (exact, O(layers × edges)),
from a model in memory. Training's evaluation runs it; ``graphshard embed`` (from a training checkpoint) is
:func:`graphshard.train.embed`."""

from .layerwise import layerwise_inference
from .plan import Plan

__all__ = ["Plan", "layerwise_inference"]

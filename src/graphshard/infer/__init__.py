"""Inference over a partitioned graph: every node's output, one layer at a time (exact, O(layers × edges)),
from a model in memory or from a training checkpoint (``graphshard embed``)."""

from .layerwise import Plan, layerwise_inference
from .embed import embed  # noqa: E402  (after layerwise: training imports it)

__all__ = ["Plan", "embed", "layerwise_inference"]

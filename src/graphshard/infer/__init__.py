"""Inference over a partitioned graph: every node's output, one layer at a time (exact, O(layers × edges))."""

from .layerwise import Plan, layerwise_inference

__all__ = ["Plan", "layerwise_inference"]

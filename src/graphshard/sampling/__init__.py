"""Single-partition neighbour sampling: compiled kernels and a multi-hop sampler over a CSC graph."""

from .neighbor import CSCGraph, NeighborSampler, SamplerOutput, sample_neighbors

__all__ = ["CSCGraph", "NeighborSampler", "SamplerOutput", "sample_neighbors"]

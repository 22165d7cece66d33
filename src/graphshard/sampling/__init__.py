"""Single-partition neighbour sampling: compiled kernels and a multi-hop sampler over a CSC graph."""

from .neighbor import CSCGraph, SamplerOutput, sample_neighbors

__all__ = ["CSCGraph", "SamplerOutput", "sample_neighbors"]

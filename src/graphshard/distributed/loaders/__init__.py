"""The loaders wing: mini-batches for training — turning requests into PyG ``Data``/``HeteroData`` (batch),
sampler worker processes (workers), batches built ahead in threads (prefetch) and the loaders themselves.

The top of :mod:`graphshard.distributed`: may import from every other wing.
"""

"""The stores wing: one process's partitions on PyG's ``FeatureStore``/``GraphStore`` interfaces — the
partitions a process serves (partitions), their local feature and graph stores, the in-memory overlay of
writes, what the stores share (base), and whole-row gathering (rows).

Imports nothing from the other wings of :mod:`graphshard.distributed`: a store here reads files, never peers.
"""

"""The integer dtypes of ``graph.safetensors``: each structure tensor in the smallest integer type that holds
its values, decided from the counts the values lie below (so both writers, in memory and dispatch, choose
alike, and the choice needs no pass over the data).

Edge-sized IDs (``indices``, ``edge/_ID``, ``edge/orig_id``) and ``node/orig_id`` are int32 when every value
fits (< 2**31), else int64; type IDs (``_TYPE``) and ``node/part_id`` are int8, int16 or int32, the smallest
that holds the counts. ``indptr`` and ``node/_ID`` are always int64: every reader needs them as int64 (offset
arithmetic that must not overflow, see :func:`graphshard.format.load.widen_nodes`), and a narrower file would
make every process that opens the partition hold its own widened copy — the partition's owner and each rank of
its host that reads it co-located (16 bytes per local node each, 0.2 GiB a rank on R-MAT 23's four
partitions) — where the int64 file is mapped once, shared through the page cache. They are per node, so they
cost little disk beside the per-edge tensors. Readers accept int32 ones too (partitions written before this)
and the int64 of partitions written before compact structure."""

from __future__ import annotations

import numpy as np

from ..limits import smallest_int

ID_KEYS = ("indptr", "indices", "node/_ID", "node/orig_id", "edge/_ID", "edge/orig_id")
WIDE_KEYS = ("indptr", "node/_ID")  # per node, needed as int64 by every reader: always stored int64
SMALL_KEYS = ("node/part_id", "node/_TYPE", "edge/_TYPE")
ID_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
SMALL_DTYPES = (np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.int64))


def structure_dtypes(
    num_local_nodes: int,
    num_edges: int,
    *,
    type_nodes: int,
    type_edges: int,
    num_parts: int,
    num_ntypes: int,
    num_etypes: int,
) -> dict[str, np.dtype]:
    """The dtype of every integer tensor of one partition's ``graph.safetensors``.

    ``num_local_nodes``: the partition's inner and HALO nodes; ``num_edges``: the graph's;
    ``type_nodes``/``type_edges``: the most nodes (edges) of one type (original per-type IDs lie below);
    ``num_parts``, ``num_ntypes``, ``num_etypes``: the counts part and type IDs lie below."""

    def ids(below: int) -> np.dtype:
        return smallest_int(0, max(below - 1, 0), np.int32)

    def small(below: int) -> np.dtype:
        return smallest_int(0, max(below - 1, 0), np.int8)

    return {
        "indices": ids(num_local_nodes),
        "node/orig_id": ids(type_nodes),
        "node/part_id": small(num_parts),
        "node/_TYPE": small(num_ntypes),
        "edge/_ID": ids(num_edges),
        "edge/orig_id": ids(type_edges),
        "edge/_TYPE": small(num_etypes),
        **dict.fromkeys(WIDE_KEYS, np.dtype(np.int64)),  # read as int64 everywhere: stored so, mapped, not copied
    }

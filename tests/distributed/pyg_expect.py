"""Independent expectations for graphshard's PyG stores: what a partition's rows and edges are, computed
from the original graph and the partition book's ID maps only (never from the stores)."""

from __future__ import annotations

import numpy as np
import torch

from graphshard import load_partition, partition_graph
from graphshard.distributed.stores.local import LocalFeatureStore, LocalGraphStore

HOMO = ("_N", "_E", "_N")


def stores(g, path, name: str, num_parts: int, part_id: int = 0, method: str = "random", num_hops: int = 1):
    """Partition ``g`` (once per path) and return ``(book, feature store, graph store)`` of ``part_id``."""
    if not (path / f"{name}.json").is_file():
        partition_graph(g, name, num_parts, path, part_method=method, num_hops=num_hops)
    part = load_partition(path / f"{name}.json", part_id)
    return part.partition_book, LocalFeatureStore(part, part_id), LocalGraphStore(part)


def offset(book, p: int, t) -> int:
    ids = book.partid2eids(p, t) if isinstance(t, tuple) else book.partid2nids(p, t)
    return int(ids[0]) if ids.numel() else 0


def orig_nodes(book, p: int, t: str, rows) -> np.ndarray:
    """Original per-type IDs of partition ``p``'s node rows of type ``t``."""
    return book.to_original(t, torch.as_tensor(rows) + offset(book, p, t)).numpy()


def orig_edges(book, p: int, et: tuple, rows) -> np.ndarray:
    """Original per-type IDs of partition ``p``'s edge rows of type ``et``."""
    return book.to_original_eids(et, torch.as_tensor(rows) + offset(book, p, et)).numpy()


def own_edges(g, book, p: int, et: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(src row, dst row, edge row)`` of every original edge of ``et`` whose two ends partition ``p`` owns."""
    src, dst = g.edges[et]
    if not len(src):
        return (np.zeros(0, np.int64),) * 3
    s_new, d_new = book.from_original(et[0], src), book.from_original(et[2], dst)
    e_new = book.from_original_eids(et, np.arange(len(src)))
    own = ((book.nid2partid(s_new, et[0]) == p) & (book.nid2partid(d_new, et[2]) == p)).numpy()
    return (
        (s_new.numpy() - offset(book, p, et[0]))[own],
        (d_new.numpy() - offset(book, p, et[2]))[own],
        (e_new.numpy() - offset(book, p, et))[own],
    )


def check_edges(g, book, p: int, et: tuple, src_rows, dst_rows, edge_rows) -> None:
    """Edge ``i`` joins ``src_rows[i] -> dst_rows[i]`` and is the original edge its edge row names."""
    src, dst = g.edges[et]
    eo = orig_edges(book, p, et, edge_rows)
    assert np.array_equal(orig_nodes(book, p, et[0], src_rows), src[eo])
    assert np.array_equal(orig_nodes(book, p, et[2], dst_rows), dst[eo])


def check_node_data(g, book, p: int, t: str, store, n_id) -> None:
    """``x``/``y`` (and any other node data PyG gathered) of a batch's nodes are the original rows."""
    orig = orig_nodes(book, p, t, n_id)
    names = {"x": "feat", "y": "label"}
    feats = g.node_feats.get(t, {})
    for key in ("x", "y"):
        if names[key] in feats:
            assert np.array_equal(store[key].numpy(), feats[names[key]][orig]), (t, key)

"""Build the arrays of one partition: structure (graph.safetensors), inner features, original IDs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass

import numpy as np

from ..format.dtypes import structure_dtypes
from ..format.tensorfile import Lazy
from ..graph import Feature, Graph, etype_str
from ..sparse import CSRRows
from .halo import LocalStructure
from .homogenize import HomoView
from .kernels import take_int64, take_rows
from .relabel import Relabelling


@dataclass(frozen=True)
class PartitionArrays:
    """Everything written for one partition, as name → array dicts (keys as docs/format.md lists them)."""

    graph: dict[str, np.ndarray]
    node_feats: dict[str, np.ndarray]
    edge_feats: dict[str, np.ndarray]
    orig_nids: dict[str, np.ndarray]
    _: KW_ONLY
    orig_eids: dict[str, np.ndarray]


def structure_arrays(
    local: LocalStructure, view: HomoView, rl: Relabelling, orig_eids: Callable[[int, int], np.ndarray] | None = None
) -> dict[str, np.ndarray | Lazy]:
    """The tensors of ``graph.safetensors`` for one partition; edge-sized derived ones are lazy.

    Every integer tensor has the smallest dtype that holds its values (:func:`~graphshard.format.dtypes.
    structure_dtypes`, from the counts alone, so the in-memory and dispatch writers choose alike): int32 IDs
    when they fit, int8 type IDs, ... Original homogeneous edge IDs of local edges ``[lo, hi)`` come from
    ``rl.perm`` unless ``orig_eids(lo, hi)`` gives them (the dispatch pipeline has them but no global
    ``perm``). Arrays held in another dtype (or as offsets) are converted chunk by chunk."""

    def orig(lo: int, hi: int) -> np.ndarray:
        if orig_eids is not None:
            return orig_eids(lo, hi)
        return take_int64(rl.perm, local.eids[lo:hi])

    n = (local.node_ids.shape[0],)
    m = (local.eids.shape[0],)
    inner_edges = local.num_inner_edges
    starts = rl.part_starts()
    dt = structure_dtypes(
        n[0],
        int(view.edge_offsets[-1]),
        type_nodes=int(np.diff(view.node_offsets).max(initial=0)),
        type_edges=int(np.diff(view.edge_offsets).max(initial=0)),
        num_parts=rl.num_parts,
        num_ntypes=view.node_offsets.shape[0] - 1,
        num_etypes=view.edge_offsets.shape[0] - 1,
    )

    def orig_nodes(lo: int, hi: int) -> np.ndarray:
        return rl.new2old[local.node_ids[lo:hi]]

    def lazy(key: str, shape: tuple[int], make: Callable[[int, int], np.ndarray]) -> Lazy:
        return Lazy(dt[key], shape, lambda lo, hi: make(lo, hi).astype(dt[key], copy=False))

    return {
        "indptr": _as(local.indptr, dt["indptr"]),
        "indices": _as(local.indices, dt["indices"]),
        "node/_ID": _as(local.node_ids, dt["node/_ID"]),
        "node/inner_node": Lazy(np.dtype(bool), n, lambda lo, hi: np.arange(lo, hi) < local.num_inner),
        "node/orig_id": lazy("node/orig_id", n, lambda lo, hi: _per_type(view, orig_nodes(lo, hi))),
        "node/part_id": lazy(
            "node/part_id", n, lambda lo, hi: np.searchsorted(starts, local.node_ids[lo:hi], side="right") - 1
        ),
        "node/_TYPE": lazy("node/_TYPE", n, lambda lo, hi: view.node_types(orig_nodes(lo, hi))),
        "edge/_ID": _as(local.eids, dt["edge/_ID"], local.eid_base),
        "edge/inner_edge": Lazy(np.dtype(bool), m, lambda lo, hi: np.arange(lo, hi) < inner_edges),
        "edge/orig_id": lazy("edge/orig_id", m, lambda lo, hi: view.per_type_eids(orig(lo, hi))),
        "edge/_TYPE": lazy("edge/_TYPE", m, lambda lo, hi: view.edge_types(orig(lo, hi))),
    }


def _per_type(view: HomoView, homo: np.ndarray) -> np.ndarray:
    return homo - view.node_offsets[view.node_types(homo)]


def _as(ids: np.ndarray, dtype: np.dtype, base: int = 0) -> np.ndarray | Lazy:
    """``base + ids`` in ``dtype``: the array itself when it already is, else converted lazily (the sum in
    int64, so an offset never overflows the stored type before the cast)."""
    if ids.dtype == dtype and base == 0:
        return ids
    return Lazy(dtype, ids.shape, lambda lo, hi: (ids[lo:hi].astype(np.int64) + base).astype(dtype, copy=False))


def inner_orig_ids(
    g: Graph, view: HomoView, rl: Relabelling, p: int
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Original per-type IDs of partition ``p``'s inner nodes and edges, keyed by (edge) type, new order."""
    nids = {}
    for t, name in enumerate(g.ntypes):
        lo, hi = rl.node_bounds[p, t], rl.node_bounds[p, t + 1]
        nids[name] = rl.new2old[lo:hi] - view.node_offsets[t]
    eids = {}
    for r, et in enumerate(g.canonical_etypes):
        lo, hi = rl.edge_bounds[p, r], rl.edge_bounds[p, r + 1]
        eids[etype_str(et)] = rl.perm[lo:hi] - view.edge_offsets[r]  # int64 result (offsets are int64)
    return nids, eids


def feature_arrays(g: Graph, orig_nids: dict[str, np.ndarray], orig_eids: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """Inner-node and inner-edge feature rows of one partition, keyed ``"<type>/<name>"`` (sparse node
    features stay :class:`~graphshard.sparse.CSRRows`)."""
    node_feats = {
        f"{t}/{name}": arr.take(orig_nids[t]) if isinstance(arr, CSRRows) else take_rows(arr, orig_nids[t])
        for t, feats in g.node_feats.items()
        for name, arr in feats.items()
    }
    edge_feats = {
        f"{etype_str(et)}/{name}": _dense_rows(arr, orig_eids[etype_str(et)])
        for et, feats in g.edge_feats.items()
        for name, arr in feats.items()
    }
    return node_feats, edge_feats


def _dense_rows(arr: Feature, ids: np.ndarray) -> np.ndarray:
    """Rows ``ids`` of an edge feature: edge features are stored dense (CSR rows as their dense rows, as the
    chunked format has them)."""
    return arr[ids] if isinstance(arr, CSRRows) else take_rows(arr, ids)

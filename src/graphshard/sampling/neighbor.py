"""Multi-hop neighbour sampling on one partition's CSC graph, in PyG's sampler-output layout.

Layer by layer: sample in-edges of the frontier, de-duplicate the new nodes (first appearance order),
relabel to local positions, and make the new nodes the next frontier. Nodes of the output start with
the seeds; ``row``/``col`` are local source/destination positions (``edge_index = [row, col]`` for
source → destination message passing), ``edge`` the sampled edges' IDs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass

import numpy as np

from ..errors import InputError
from ..graph import is_tensor, to_numpy
from .kernels import relabel_dense, relabel_hashed, sample_layer


@dataclass(frozen=True)
class CSCGraph:
    """In-adjacency: in-edges of node ``v`` are ``indices[indptr[v]:indptr[v+1]]`` (sources) with IDs
    ``edge_ids`` (positions by default). ``node_time`` (optional) enables temporal sampling. NumPy arrays or
    torch tensors (as ``load_partition`` returns them): tensors are seen as NumPy arrays, without a copy."""

    indptr: np.ndarray
    indices: np.ndarray
    edge_ids: np.ndarray | None = None
    node_time: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ("indptr", "indices", "edge_ids", "node_time"):
            value = getattr(self, name)
            if value is not None and is_tensor(value):
                object.__setattr__(self, name, to_numpy(value))  # frozen: set once, here
        check_csc(self.indptr, self.indices, "CSCGraph")
        for name in ("edge_ids", "node_time"):
            arr = getattr(self, name)
            want = self.indices.shape[0] if name == "edge_ids" else self.num_nodes
            if arr is not None and np.asarray(arr).shape[:1] != (want,):
                raise InputError(f"CSCGraph: {name} must have {want} entries, got shape {np.asarray(arr).shape}")

    @property
    def num_nodes(self) -> int:
        return int(self.indptr.shape[0] - 1)


def check_csc(indptr: np.ndarray, indices: np.ndarray, where: str) -> None:
    """The bounds the compiled samplers rely on (checked once per graph, never per edge): a 1-D int32 or
    int64 ``indptr`` starting at 0, never decreasing, ending at ``len(indices)``; ``indices`` (int32 or int64:
    partitions store them compact) within the nodes."""
    for name, arr in (("indptr", indptr), ("indices", indices)):
        if not isinstance(arr, np.ndarray) or arr.ndim != 1 or arr.dtype not in (np.int32, np.int64):
            raise InputError(f"{where}: {name} must be a 1-D int32 or int64 array")
    if indptr.shape[0] < 1 or indptr[0] != 0 or indptr[-1] != indices.shape[0]:
        raise InputError(f"{where}: indptr must start at 0 and end at len(indices) = {indices.shape[0]}")
    bad = np.flatnonzero(np.diff(indptr) < 0)
    if bad.size:
        raise InputError(f"{where}: indptr decreases at node {int(bad[0])}")
    n = indptr.shape[0] - 1
    if indices.size and (indices.min() < 0 or indices.max() >= n):
        i = int(np.flatnonzero((indices < 0) | (indices >= n))[0])
        raise InputError(f"{where}: indices[{i}] = {int(indices[i])} is not a node ID in [0, {n})")


def check_aligned(where: str, num_nodes: int, num_edges: int, arrays: dict[str, np.ndarray]) -> None:
    """Arrays named ``node/...`` have one entry per node, ``edge/...`` one per edge (the kernels index
    them by node or edge position without bounds checks)."""
    for name, arr in arrays.items():
        per = name.split("/", 1)[0]
        want = num_nodes if per == "node" else num_edges
        if np.asarray(arr).shape[:1] != (want,):
            raise InputError(
                f"{where}: {name} has shape {np.asarray(arr).shape}, expected {want} entries (one per {per})"
            )


@dataclass(frozen=True)
class SamplerOutput:
    """``node``: sampled node IDs (seeds first); ``row``/``col``: local source/destination of each
    sampled edge; ``edge``: edge IDs; ``batch``: seed index of every node (disjoint mode only);
    ``num_sampled_nodes``/``num_sampled_edges``: per hop (hop 0 = the seeds)."""

    node: np.ndarray
    row: np.ndarray
    col: np.ndarray
    edge: np.ndarray
    _: KW_ONLY
    batch: np.ndarray | None
    num_sampled_nodes: list[int]
    num_sampled_edges: list[int]


class DenseSlot:
    """The relabelling workspace of a batch: a position per node ID of the graph (-1: not in the batch).
    O(nodes of the graph) once, then the fastest lookup: for a sampler of one graph held whole."""

    def __init__(self, num_nodes: int):
        self.slot = np.full(num_nodes, -1, dtype=np.int64)

    def seed(self, seeds: np.ndarray) -> None:
        self.slot[seeds] = np.arange(seeds.shape[0], dtype=np.int64)

    def relabel(self, ids: np.ndarray, base: int) -> tuple[np.ndarray, np.ndarray]:
        return relabel_dense(ids, self.slot, base)

    def clear(self, nodes: np.ndarray) -> None:
        self.slot[nodes] = -1


class HashSlot:
    """The relabelling workspace of a batch as an open-addressing table that grows with the batch: memory
    follows the batch, not the graph (a distributed sampler's IDs span the whole graph)."""

    def __init__(self, capacity: int = 1 << 12):
        self.keys = np.full(capacity, -1, dtype=np.int64)
        self.vals = np.zeros(capacity, dtype=np.int64)
        self.size = 0  # positions handed out

    def _reserve(self, count: int) -> None:
        if 2 * count <= self.keys.shape[0]:
            return
        occupied = np.flatnonzero(self.keys >= 0)
        ids = self.keys[occupied][np.argsort(self.vals[occupied])]  # in position order: 0, 1, 2, ...
        capacity = 1 << int(2 * count - 1).bit_length()
        self.keys, self.vals = np.full(capacity, -1, dtype=np.int64), np.zeros(capacity, dtype=np.int64)
        relabel_hashed(ids, self.keys, self.vals, 0)

    def seed(self, seeds: np.ndarray) -> None:
        self.relabel(seeds, 0)

    def relabel(self, ids: np.ndarray, base: int) -> tuple[np.ndarray, np.ndarray]:
        self._reserve(base + ids.shape[0])
        local, first = relabel_hashed(np.ascontiguousarray(ids, dtype=np.int64), self.keys, self.vals, base)
        self.size = base + first.shape[0]
        return local, first

    def clear(self, nodes: np.ndarray) -> None:
        self.keys.fill(-1)
        self.size = 0


Slot = DenseSlot | HashSlot


class NeighborSampler:
    """Samples many mini-batches from one graph, reusing an O(N) relabelling workspace."""

    def __init__(self, graph: CSCGraph, fanouts: list[int], replace: bool = False, disjoint: bool = False):
        self.graph, self.fanouts, self.replace, self.disjoint = graph, list(fanouts), replace, disjoint
        self._slot = DenseSlot(graph.num_nodes)

    def sample(self, seeds: np.ndarray, seed: int = 0, seed_time: np.ndarray | None = None) -> SamplerOutput:
        """One mini-batch: see :func:`sample_neighbors`."""
        return sample_neighbors(
            self.graph,
            seeds,
            self.fanouts,
            self.replace,
            seed=seed,
            disjoint=self.disjoint,
            seed_time=seed_time,
            _slot=self._slot,
        )


def sample_neighbors(
    graph: CSCGraph,
    seeds: np.ndarray,
    fanouts: list[int],
    replace: bool = False,
    *,
    seed: int = 0,
    disjoint: bool = False,
    seed_time: np.ndarray | None = None,
    _slot: Slot | None = None,
) -> SamplerOutput:
    """Sample ``len(fanouts)`` hops of in-neighbours of ``seeds`` (fanout ``-1``: every in-edge).

    ``disjoint=True`` gives every seed its own subtree (nodes may repeat across seeds; ``batch`` says
    whose). ``seed_time`` (with ``graph.node_time``) restricts every hop to neighbours not newer than
    the seed they descend from; it implies disjoint mode, since a node shared by seeds of different
    times has no single time limit. Deterministic for a given ``seed``.
    """
    seeds = np.asarray(seeds, dtype=np.int64)
    if seeds.size and (seeds.min() < 0 or seeds.max() >= graph.num_nodes):
        raise InputError(f"seed IDs must lie in [0, {graph.num_nodes})")
    if seed_time is not None and graph.node_time is None:
        raise InputError("temporal sampling needs graph.node_time as well as seed_time")
    if seed_time is not None:
        seed_time = np.asarray(seed_time)
        if seed_time.shape != seeds.shape:
            raise InputError(f"seed_time has shape {seed_time.shape}, seeds {seeds.shape}")
        disjoint = True

    def layer(ids: np.ndarray, owner: np.ndarray | None, fanout: int, hop: int):
        times = None if seed_time is None else seed_time[owner]  # seed times imply disjoint mode: owners given
        counts, pos = sample_layer(
            graph.indptr,
            graph.indices,
            ids,
            fanout,
            replace=replace,
            key=seed * 1_000_003 + hop,
            node_time=None if times is None else graph.node_time,
            seed_time=times,
        )
        return counts, graph.indices[pos], pos if graph.edge_ids is None else graph.edge_ids[pos]

    slot = None if disjoint else (_slot if _slot is not None else DenseSlot(graph.num_nodes))
    return expand_hops(seeds, fanouts, layer, graph.num_nodes, slot=slot)


Layer = Callable[[np.ndarray, np.ndarray | None, int, int], tuple[np.ndarray, np.ndarray, np.ndarray]]


def expand_hops(
    seeds: np.ndarray, fanouts: list[int], layer: Layer, num_nodes: int, *, slot: Slot | None
) -> SamplerOutput:
    """The hop loop shared by the local and distributed samplers.

    ``layer(ids, owner, fanout, hop)`` samples in-edges of the frontier nodes ``ids`` (``owner``: the seed
    index each descends from, in disjoint mode; None otherwise) and returns ``(counts per node, source IDs,
    edge IDs)`` listed node by node.
    With ``slot`` (a relabelling workspace, :class:`DenseSlot` or :class:`HashSlot`, left clean) nodes are shared
    across seeds and de-duplicated in first-appearance order; without it every seed keeps a disjoint subtree.
    """
    disjoint = slot is None
    if slot is not None:
        _, first = np.unique(seeds, return_index=True)
        seeds = seeds[np.sort(first)]
        slot.seed(seeds)
    all_nodes, all_owner = seeds, np.arange(seeds.shape[0], dtype=np.int64)
    known: dict[str, np.ndarray] | None = (
        {"keys": all_owner * num_nodes + seeds, "pos": all_owner.copy()} if disjoint else None
    )
    frontier = np.arange(seeds.shape[0], dtype=np.int64)  # output positions of the nodes to expand
    rows, cols, edges, n_nodes, n_edges = [], [], [], [seeds.shape[0]], [0]
    try:
        for hop, fanout in enumerate(fanouts):
            if frontier.size == 0:
                n_nodes.append(0)
                n_edges.append(0)
                continue
            counts, src_ids, eids = layer(all_nodes[frontier], all_owner[frontier] if disjoint else None, fanout, hop)
            dst = np.repeat(frontier, counts)
            base = int(all_nodes.shape[0])
            if slot is None:
                assert known is not None  # made above exactly when there is no slot (disjoint)
                src_owner = all_owner[dst]
                local, _, new_first = _relabel(src_owner * num_nodes + src_ids, known, base)
                all_owner = np.concatenate([all_owner, src_owner[new_first]])
            else:  # shared nodes: no owners to follow
                local, new_first = slot.relabel(src_ids, base)
            all_nodes = np.concatenate([all_nodes, src_ids[new_first]])
            frontier = np.arange(base, all_nodes.shape[0], dtype=np.int64)
            rows.append(local)
            cols.append(dst)
            edges.append(eids)
            n_nodes.append(int(new_first.shape[0]))
            n_edges.append(int(src_ids.shape[0]))
    finally:
        if slot is not None:
            slot.clear(all_nodes)  # leave the workspace clean for the next batch
    cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64)  # noqa: E731
    return SamplerOutput(
        all_nodes,
        cat(rows),
        cat(cols),
        cat(edges),
        batch=all_owner if disjoint else None,
        num_sampled_nodes=n_nodes,
        num_sampled_edges=n_edges,
    )


def _relabel(keys: np.ndarray, known: dict[str, np.ndarray], base: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Output positions of ``keys``: known ones keep theirs, new ones are appended in first-appearance
    order from ``base``. Updates ``known`` (sorted lookup). Returns (positions, new keys, first index)."""
    uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(known["keys"], kind="stable")
    sorted_keys = known["keys"][order]
    at = np.searchsorted(sorted_keys, uniq)
    hit = (
        (at < sorted_keys.shape[0]) & (sorted_keys[np.minimum(at, max(sorted_keys.shape[0] - 1, 0))] == uniq)
        if sorted_keys.size
        else np.zeros(uniq.shape[0], dtype=bool)
    )
    pos_of_uniq = np.empty(uniq.shape[0], dtype=np.int64)
    pos_of_uniq[hit] = known["pos"][order[at[hit]]]
    new = np.flatnonzero(~hit)
    new = new[np.argsort(first[new], kind="stable")]  # first-appearance order
    pos_of_uniq[new] = base + np.arange(new.shape[0], dtype=np.int64)
    known["keys"] = np.concatenate([known["keys"], uniq[new]])
    known["pos"] = np.concatenate([known["pos"], pos_of_uniq[new]])
    return pos_of_uniq[inverse], uniq[new], first[new]

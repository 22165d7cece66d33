"""One partition's in-adjacency, addressed by global homogeneous new IDs of its inner nodes, sampled by
the compiled kernels. Heterogeneous partitions keep each node's in-edges sorted by edge type, so every
(node, edge type) pair is a contiguous range with its own fanout."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...book import RangePartitionBook
from ...errors import InputError
from ...format.load import PartitionGraph
from ...partition.kernels import ragged_ranges
from ...sampling.kernels import neighbour_ids, place_runs, sample_ranges, typed_ranges
from ...sampling.neighbor import check_aligned, check_csc
from ..ranks.context import DistError
from ..stores.partitions import Served

NO_TIME = -np.inf  # node types without the time attribute are never filtered out


class LocalSamplingGraph:
    """Sampling server state of one partition. ``times`` (optional) returns the values of a node
    attribute for the partition's local nodes (inner and HALO), for temporal sampling."""

    def __init__(
        self,
        graph: PartitionGraph,
        book: RangePartitionBook,
        part_id: int,
        times: Callable[[str, np.ndarray], np.ndarray] | None = None,
    ):
        self.book, self.num_etypes = book, len(book.canonical_etypes)
        self.indptr = graph.indptr.numpy()
        self.indices = graph.indices.numpy()
        where = f"partition {part_id}"
        check_csc(self.indptr, self.indices, where)  # the compiled kernels trust these bounds
        self.node_gid = graph.ndata["_ID"].numpy()
        self.edge_gid = graph.edata["_ID"].numpy()
        check_aligned(
            where,
            self.indptr.shape[0] - 1,
            self.indices.shape[0],
            {"node/_ID": self.node_gid, "edge/_ID": self.edge_gid, "edge/_TYPE": graph.edata["_TYPE"].numpy()},
        )
        self.etype: np.ndarray | None = None  # with several edge types: each edge's, in-edges sorted by it
        if self.num_etypes > 1:
            self._sort_by_type(graph.edata["_TYPE"].numpy())  # as stored (int8 in compact partitions)
        ntid = {t: i for i, t in enumerate(book.ntypes)}
        self.dst_ntype = np.array([ntid[et[2]] for et in book.canonical_etypes], dtype=np.int64)
        lo, hi = book.node_range(part_id)
        self.start, self.count = (lo if hi > lo else 0), hi - lo
        # Inner nodes come first with global IDs [start, start + count): the loader refuses any partition that
        # breaks this (format.load._read_graph), so their IDs are computed, not read (see neighbour_ids).
        self.inner = self.count
        self._times_source = times
        self._times: dict[str, np.ndarray] = {}
        self.key = ""  # under which this process serves it (see sampler.serve_sampling)

    def _sort_by_type(self, etype: np.ndarray) -> None:
        dst = np.repeat(np.arange(self.indptr.shape[0] - 1, dtype=np.int64), np.diff(self.indptr))
        key = dst * self.num_etypes + etype
        if key.size and not (key[1:] >= key[:-1]).all():
            perm = np.argsort(key, kind="stable")
            self.indices, self.edge_gid, etype = self.indices[perm], self.edge_gid[perm], etype[perm]
        self.etype = etype

    def node_time(self, attr: str) -> np.ndarray:
        """``attr`` of every local node (float64), fetched once; -inf for types without it."""
        if attr not in self._times:
            if self._times_source is None:
                raise DistError("this sampling graph has no source of node times")
            times = np.asarray(self._times_source(attr, self.node_gid))
            check_aligned(f"time attribute {attr!r}", self.node_gid.shape[0], 0, {"node/time": times})
            self._times[attr] = times
        return self._times[attr]

    def _slots(self, gids: np.ndarray, local: np.ndarray, fanouts: np.ndarray):
        """(node index, start, end, fanout) of every (node, edge type) range to sample, node-major."""
        if self.etype is None:
            return (
                np.arange(gids.shape[0]),
                self.indptr[local],
                self.indptr[local + 1],
                np.full(gids.shape[0], fanouts[0], dtype=np.int64),
            )
        ntype = self.book.map_to_per_ntype(gids)[0].numpy()
        node_lists, type_lists = [], []
        for r in np.flatnonzero(fanouts != 0):
            sel = np.flatnonzero(ntype == self.dst_ntype[r])
            node_lists.append(sel)
            type_lists.append(np.full(sel.shape[0], r, dtype=np.int64))
        node_idx = np.concatenate(node_lists) if node_lists else np.zeros(0, np.int64)
        types = np.concatenate(type_lists) if type_lists else np.zeros(0, np.int64)
        order = np.argsort(node_idx, kind="stable")
        node_idx, types = node_idx[order], types[order]
        starts, ends = typed_ranges(self.indptr, self.etype, local[node_idx], types)
        return node_idx, starts, ends, fanouts[types]

    def sample(
        self,
        gids: np.ndarray,
        fanouts: np.ndarray,
        replace: bool,
        key: int,
        *,
        seed_time: np.ndarray | None = None,
        time_attr: str | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """In-edges of these inner nodes, up to ``fanouts[r]`` of edge type ``r`` each: returns
        ``(counts per node, neighbour global IDs, edge global IDs)`` listed node by node."""
        local = gids - self.start
        if local.size and (local.min() < 0 or local.max() >= self.count):
            raise DistError(
                f"sampling request for nodes this partition does not own (it owns "
                f"[{self.start}, {self.start + self.count}))"
            )
        node_idx, starts, ends, slot_fanouts = self._slots(gids, local, np.asarray(fanouts, dtype=np.int64))
        node_time = slot_time = None
        if seed_time is not None:
            assert time_attr is not None, "seed times come with their attribute (the sampler checks it)"
            node_time, slot_time = self.node_time(time_attr), np.asarray(seed_time, dtype=np.float64)[node_idx]
        counts, pos = sample_ranges(
            starts, ends, self.indices, slot_fanouts, replace=replace, key=key, node_time=node_time, slot_time=slot_time
        )
        if self.etype is None:  # one range per node, in node order
            per_node = np.asarray(counts, dtype=np.int64)
        else:
            per_node = np.bincount(node_idx, weights=counts, minlength=gids.shape[0]).astype(np.int64)
        # edge IDs may be stored int32: the answer is int64 like every ID the runtime passes on
        return (per_node, *neighbour_ids(pos, self.indices, self.node_gid, self.edge_gid, self.inner, self.start))

    def expected_sources(
        self, gids: np.ndarray, weights: np.ndarray, fanouts: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Expected reads of the in-neighbours of these inner nodes when each node ``v`` is expanded
        ``weights[v]`` times with ``fanouts`` (per edge type; -1 = all): an in-edge of a range of ``d`` edges
        with fanout ``f`` is taken with probability ``min(1, f / d)``. Returns distinct neighbour global IDs
        and their summed expected reads (time filters are ignored: an upper bound for temporal sampling)."""
        local = gids - self.start
        node_idx, starts, ends, fan = self._slots(gids, local, np.asarray(fanouts, dtype=np.int64))
        deg = ends - starts
        take = np.where(fan < 0, 1.0, np.minimum(1.0, fan / np.maximum(deg, 1)))
        pos = ragged_ranges(starts, deg)
        return sum_by_id(
            self.node_gid[self.indices[pos]], np.repeat(weights[node_idx] * take, deg), self.book.num_nodes()
        )


class ServedSamplingGraph:
    """The sampling graphs of consecutive stored partitions one process serves, answering as one (see
    :mod:`graphshard.distributed.stores.partitions`): each request is split by partition and the answers put back
    in request order."""

    def __init__(self, segments: list[LocalSamplingGraph]):
        self.segments, self.book = segments, segments[0].book
        self.start, self.count = segments[0].start, sum(g.count for g in segments)
        self.bounds = np.array([g.start for g in segments] + [self.start + self.count], dtype=np.int64)
        self.key = ""

    def _split(self, gids: np.ndarray) -> list[tuple[LocalSamplingGraph, np.ndarray]]:
        seg = np.searchsorted(self.bounds, gids, side="right") - 1
        return [(g, np.flatnonzero(seg == k)) for k, g in enumerate(self.segments)]

    def sample(
        self,
        gids: np.ndarray,
        fanouts: np.ndarray,
        replace: bool,
        key: int,
        *,
        seed_time: np.ndarray | None = None,
        time_attr: str | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As :meth:`LocalSamplingGraph.sample`, over all the served partitions."""
        if gids.size and (gids.min() < self.start or gids.max() >= self.start + self.count):
            raise DistError(
                f"sampling request for nodes this process does not serve (it serves "
                f"[{self.start}, {self.start + self.count}))"
            )
        blocks = [
            (
                pos,
                g.sample(
                    gids[pos],
                    fanouts,
                    replace,
                    key,
                    seed_time=None if seed_time is None else seed_time[pos],
                    time_attr=time_attr,
                ),
            )
            for g, pos in self._split(gids)
            if pos.size
        ]
        return assemble(gids.shape[0], blocks)

    def expected_sources(
        self, gids: np.ndarray, weights: np.ndarray, fanouts: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`LocalSamplingGraph.expected_sources`, over all the served partitions."""
        got = [g.expected_sources(gids[pos], weights[pos], fanouts) for g, pos in self._split(gids) if pos.size]
        if not got:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        return sum_by_id(
            np.concatenate([i for i, _ in got]), np.concatenate([w for _, w in got]), self.book.num_nodes()
        )


# What one process serves sampling requests from: one partition's sampling graph, or several served as one.
SamplingGraph = LocalSamplingGraph | ServedSamplingGraph


def served_sampling_graph(
    served: Served, times: Callable[[str, np.ndarray], np.ndarray] | None = None
) -> SamplingGraph:
    """The sampling graph of what one process serves: one partition's, or several served as one."""
    if len(served.parts) == 1:
        return LocalSamplingGraph(served.parts[0].graph, served.book, served.part_id, times)
    return ServedSamplingGraph(
        [
            LocalSamplingGraph(part.graph, served.stored_book, p, times)
            for part, p in zip(served.parts, served.stored_ids)
        ]
    )


def assemble(
    n: int, blocks: Sequence[tuple[np.ndarray, tuple[np.ndarray, ...]]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(counts, neighbours, edges)`` of ``n`` requested nodes, listed node by node, from the answers
    ``(positions, (counts, neighbours, edges))`` for disjoint parts of the request (positions ascending, as
    ``book.positions_by_part`` gives them: one answer for ``n`` positions is the whole request in order)."""
    if len(blocks) == 1 and blocks[0][0].shape[0] == n:  # one answer for all, in request order (positions sorted)
        c, n_, e = blocks[0][1]
        return np.asarray(c, dtype=np.int64), n_, e
    counts = np.zeros(n, dtype=np.int64)
    for pos, res in blocks:
        counts[pos] = res[0]
    starts = np.cumsum(counts) - counts  # where each node's neighbours go, in request order
    nbrs = np.empty(int(counts.sum()), dtype=np.int64)
    edges = np.empty_like(nbrs)
    for pos, (c, n_, e) in blocks:
        place_runs(starts[pos], np.asarray(c, dtype=np.int64), n_, e, nbrs, edges)
    return counts, nbrs, edges


def sum_by_id(ids: np.ndarray, weights: np.ndarray, bound: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ``ids`` (sorted) and the sum of the ``weights`` of each. With ``bound`` (all IDs below it)
    and many IDs, one dense ``bincount`` replaces the sort."""
    if bound is not None and ids.shape[0] * 4 >= bound:
        total = np.bincount(ids, weights=weights, minlength=bound)
        present = np.bincount(ids, minlength=bound) > 0
        uniq = np.flatnonzero(present)
        return uniq, total[uniq]
    uniq, inverse = np.unique(ids, return_inverse=True)
    return uniq, np.bincount(inverse.reshape(-1), weights=weights, minlength=uniq.shape[0])


def feature_times(
    lookup: Callable[[str, str, np.ndarray], Any], has: Callable[[str, str], bool], book: RangePartitionBook
) -> Callable[[str, np.ndarray], np.ndarray]:
    """A ``times`` source for :class:`LocalSamplingGraph` reading a node feature through ``lookup``."""

    def times(attr: str, gids: np.ndarray) -> np.ndarray:
        if not any(has(t, attr) for t in book.ntypes):
            raise InputError(f"no node type has the time attribute {attr!r}")
        ntype, per_type = (t.numpy() for t in book.map_to_per_ntype(gids))
        out = np.full(gids.shape[0], NO_TIME, dtype=np.float64)
        for i, t in enumerate(book.ntypes):
            sel = np.flatnonzero(ntype == i)
            if sel.size and has(t, attr):
                got = lookup(t, attr, per_type[sel])
                got = got.double() if hasattr(got, "double") else got  # bfloat16 (feat_dtype) has no NumPy type
                out[sel] = np.asarray(got, dtype=np.float64).reshape(-1)
        return out

    return times

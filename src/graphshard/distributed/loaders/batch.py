"""Turn mini-batch requests into PyG ``Data``/``HeteroData``: sample the seeds' neighbourhoods (node or
link seeds, with negative sampling), fetch features and labels of every sampled node. The same
:class:`BatchMaker` runs in the training process or in sampler worker processes."""

from __future__ import annotations

import time
from dataclasses import KW_ONLY, dataclass, replace
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data, HeteroData

from ...book import RangePartitionBook
from ...device.rowcache import DeviceRowCache, cached_layout
from ...errors import InputError
from ...graph import EType
from ...sparse import sparse_tensor
from ..groups.rpc import RpcGroup
from ..remote.feature import Allocate, DistFeatureStore
from ..remote.sampler import DistNeighborSampler
from ..remote.sampling_graph import SamplingGraph
from ..transport.wire import STORED, check_wire

NEG_MODES = ("binary", "triplet", "joint", "hard")


@dataclass(frozen=True)
class BatchSpec:
    """What a loader's batches hold. ``input_type``: node type of node seeds; ``edge_type``: type of
    link seeds; ``neg_mode`` ``"binary"`` (``edge_label`` 1/0 over positives then negatives),
    ``"triplet"`` (``src_index``, ``dst_pos_index``, ``dst_neg_index``) or ``"joint"`` (the positives'
    ``edge_label_index``, and ``dst_neg_index``: ``ceil(neg_amount)`` destinations shared by all of them) or
    ``"hard"`` (the positives' ``edge_label_index``, and ``dst_neg_index`` ``(B, 2 ceil(neg_amount))``: random
    in-neighbours of each destination along the edge type, random nodes where it has too few — or the request's
    given ``hard`` negatives — then as many random nodes);
    ``neg_amount`` negatives per positive. ``feat_name``/``label_name`` become ``x``/``y`` where a node type has them.
    ``exclude_seed_edges``: drop sampled edges joining a positive seed pair, in either direction (so the
    model cannot read a training link off its own neighbourhood — held-out links are never there).
    ``sparse_x``: a node type whose ``feat_name`` is held as CSR gets ``x`` as a sparse COO tensor of its
    rows (only their non-zeros fetched and kept) instead of dense rows. ``wire_dtype``: how dense
    feature rows travel from other processes (see :mod:`graphshard.distributed.transport.wire`). ``edge_feat_name``:
    edges of a type that has this feature get its rows as ``edge_attr``; ``node_attrs``: further node data
    attached under their own names where a type has them (e.g. the split masks, as PyG's loaders give them).
    All rows of a batch come in one request per owning partition."""

    num_neighbors: Any
    replace: bool = False
    disjoint: bool = False
    time_attr: str | None = None
    _: KW_ONLY
    feat_name: str = "feat"
    label_name: str | None = "label"
    input_type: str | None = None
    edge_type: EType | None = None
    neg_mode: str | None = None
    neg_amount: float = 1.0
    exclude_seed_edges: bool = False
    sparse_x: bool = False
    wire_dtype: str = STORED
    edge_feat_name: str | None = None
    node_attrs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_wire(self.wire_dtype)
        if self.neg_mode not in (None, *NEG_MODES):
            raise InputError(f"neg_mode must be one of {', '.join(NEG_MODES)} or None, got {self.neg_mode!r}")
        if self.neg_mode in ("joint", "hard") and self.time_attr is not None:
            raise InputError(f"neg_mode {self.neg_mode!r} has no temporal sampling")
        if self.neg_mode is not None and self.neg_amount <= 0:
            raise InputError(f"neg_amount must be positive, got {self.neg_amount}")


@dataclass(frozen=True)
class BatchRequest:
    """Batch ``index`` of an epoch: ``seeds`` are per-type node IDs (node loader) or a ``(2, B)`` array of
    source/destination IDs (link loader); ``time`` per seed (temporal); ``key`` seeds all randomness;
    ``input_id`` the position of each seed in the loader's input (PyG's ``input_id``; default 0..B-1);
    ``hard``: each positive's given hard negatives ``(B, k)``, per-type destination IDs (-1: none given)."""

    index: int
    key: int
    seeds: np.ndarray
    time: np.ndarray | None = None
    _: KW_ONLY
    label: np.ndarray | None = None
    input_id: np.ndarray | None = None
    hard: np.ndarray | None = None


def stretched(requests_of: Any, epoch: int, per_pass: int, steps: int) -> list[BatchRequest]:
    """``steps`` batches for ``epoch`` from passes over the seeds of ``per_pass`` batches each (a loader that
    keeps pace with a longer one): pass ``p`` is ``requests_of(epoch * passes + p)``, shuffled anew, and the
    batches are numbered on."""
    if steps == per_pass:
        return requests_of(epoch)
    passes = -(-steps // per_pass)
    reqs = [r for p in range(passes) for r in requests_of(epoch * passes + p)][:steps]
    return [replace(r, index=i) for i, r in enumerate(reqs)]


def _input_id(req: BatchRequest, count: int) -> np.ndarray:
    return np.arange(count, dtype=np.int64) if req.input_id is None else np.asarray(req.input_id, dtype=np.int64)


def first_positions(ids: np.ndarray) -> np.ndarray:
    """Position of each ID among the distinct IDs in first-appearance order (how samplers de-duplicate)."""
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    rank = np.empty(first.shape[0], dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.shape[0])
    return rank[inverse.reshape(-1)]


def drop_pair_edges(out: Any, src: np.ndarray, dst: np.ndarray, num_nodes: int) -> Any:
    """``out`` (homogeneous sampler output) without its edges ``src[i] -> dst[i]`` or ``dst[i] -> src[i]``
    (homogeneous IDs); per-hop edge counts follow."""
    keys = out.node[out.row] * num_nodes + out.node[out.col]
    drop = np.isin(keys, np.concatenate([src * num_nodes + dst, dst * num_nodes + src]))
    if not drop.any():
        return out
    keep = ~drop
    hop = np.repeat(np.arange(len(out.num_sampled_edges)), out.num_sampled_edges)
    counts = np.bincount(hop[keep], minlength=len(out.num_sampled_edges))
    return replace(
        out, row=out.row[keep], col=out.col[keep], edge=out.edge[keep], num_sampled_edges=[int(c) for c in counts]
    )


class BatchMaker:
    """Builds batches for one loader from one process's view of the distributed graph."""

    def __init__(
        self,
        spec: BatchSpec,
        group: RpcGroup,
        sampling_graph: SamplingGraph,
        features: DistFeatureStore,
        *,
        book: RangePartitionBook,
        near: dict[int, SamplingGraph] | None = None,
        allocate: Allocate | None = None,
        row_cache: DeviceRowCache | None = None,
    ):
        self.spec, self.features, self.book = spec, features, book
        # where dense rows are gathered (reused pinned buffers for a GPU), and the rows the device holds
        self.allocate, self.row_cache = allocate, row_cache
        self.sampler = DistNeighborSampler(
            group,
            sampling_graph,
            book,
            spec.num_neighbors,
            replace=spec.replace,
            disjoint=spec.disjoint,
            time_attr=spec.time_attr,
            near=near,
        )
        self.hetero = len(book.ntypes) > 1 or len(book.canonical_etypes) > 1

    def __call__(self, req: BatchRequest) -> Data | HeteroData:
        """The batch, with ``sample_time``/``fetch_time`` (seconds spent sampling / fetching features),
        ``fetch_bytes`` (feature bytes that came from other processes), ``colocated_rows`` (rows read in-process
        from co-located partitions) and ``cache_hits``/``cache_misses``/
        ``cache_bytes_saved`` (remote rows served by the remote-feature cache or not) as plain attributes."""
        mine = self.features.stats.mine  # this thread's counts: other builders may fetch meanwhile
        start, fetched, near, cached = (
            time.perf_counter(),
            mine().get("bytes_received", 0),
            mine().get("colocated_rows", 0),
            self._cache_counts(),
        )
        self._fetch_time = 0.0
        data = self._link(req) if self.spec.edge_type is not None else self._node(req)
        data.fetch_time = self._fetch_time
        data.sample_time = time.perf_counter() - start - self._fetch_time
        data.fetch_bytes = mine().get("bytes_received", 0) - fetched
        data.colocated_rows = mine().get("colocated_rows", 0) - near
        data.cache_hits, data.cache_misses, data.cache_bytes_saved = (
            a - b for a, b in zip(self._cache_counts(), cached)
        )
        return data

    def _cache_counts(self) -> tuple[int, int, int]:
        """This thread's cache hits, misses and bytes saved so far."""
        cache = self.features.cache
        mine = {} if cache is None else cache.stats.mine()
        return mine.get("hits", 0), mine.get("misses", 0), mine.get("bytes_saved", 0)

    def around(self, seeds: np.ndarray, key: int) -> Data | HeteroData:
        """The sampled neighbourhood of global homogeneous ``seeds`` (of any types; distinct) as a batch with
        every node's ``n_id`` (per-type IDs) and inputs: no seed bookkeeping (for callers that add nodes
        of their own, as ``graphshard serve`` does for new nodes)."""
        self._fetch_time = 0.0
        data, _ = self._collate(self.sampler.sample(np.asarray(seeds, dtype=np.int64), seed=key))
        return data

    # -- seeds ------------------------------------------------------------------------------------
    def _homo(self, ids: np.ndarray, ntype: str) -> np.ndarray:
        return self.book.map_to_homo_nid(ids, ntype).numpy() if self.hetero else np.asarray(ids, dtype=np.int64)

    def _node(self, req: BatchRequest) -> Data | HeteroData:
        ntype = self.spec.input_type or self.book.ntypes[0]
        seeds, times = np.asarray(req.seeds, dtype=np.int64), req.time
        input_id = _input_id(req, seeds.shape[0])
        if times is None and not self.spec.disjoint:  # a node seeded twice would shift the seed rows
            _, first = np.unique(seeds, return_index=True)
            keep = np.sort(first)
            seeds, input_id = seeds[keep], input_id[keep]
        out = self.sampler.sample(self._homo(seeds, ntype), seed=req.key, seed_time=times)
        data, _ = self._collate(out)
        store = data[ntype] if self.hetero else data
        store.batch_size = int(seeds.shape[0])
        store.input_id = torch.from_numpy(input_id)
        if times is not None:
            store.seed_time = torch.as_tensor(times)
        return data

    def _link(self, req: BatchRequest) -> Data | HeteroData:
        edge_type = self.spec.edge_type
        assert edge_type is not None, "a link loader's batch (see __call__)"
        s_t, _, d_t = edge_type
        src, dst = (np.asarray(a, dtype=np.int64) for a in req.seeds)
        rng = np.random.default_rng(req.key)
        n_pos, mode = src.shape[0], self.spec.neg_mode
        times = None if req.time is None else np.asarray(req.time)
        label = torch.ones(n_pos) if req.label is None else torch.as_tensor(req.label)
        dst_neg = None
        if mode == "binary":
            n_neg = max(1, round(self.spec.neg_amount * n_pos))
            src = np.concatenate([src, rng.integers(0, self.book.num_nodes(s_t), n_neg)])
            dst = np.concatenate([dst, rng.integers(0, self.book.num_nodes(d_t), n_neg)])
            label = torch.cat([label, torch.zeros(n_neg, dtype=label.dtype)])
            times = None if times is None else np.concatenate([times, times[np.arange(n_neg) % n_pos]])
        elif mode in ("triplet", "joint"):  # joint: one row of negatives, shared by the batch's positives
            k = max(1, int(np.ceil(self.spec.neg_amount)))
            dst_neg = rng.integers(0, self.book.num_nodes(d_t), (n_pos if mode == "triplet" else 1, k))
        elif mode == "hard":
            k = max(1, int(np.ceil(self.spec.neg_amount)))
            dst_neg = (
                self._hard(src, dst, edge_type, k, key=req.key, rng=rng)
                if req.hard is None
                else self._given(req.hard, d_t, rng)
            )
        ends = [self._homo(src, s_t), self._homo(dst, d_t)]
        if dst_neg is not None:
            ends.append(self._homo(dst_neg.reshape(-1), d_t))
        seeds = np.concatenate(ends)
        seed_time = None
        if times is not None:
            seed_time = np.concatenate(
                [times, times] + ([np.repeat(times, dst_neg.shape[1])] if dst_neg is not None else [])
            )
        out = self.sampler.sample(seeds, seed=req.key, seed_time=seed_time)
        if self.spec.exclude_seed_edges:
            out = drop_pair_edges(out, ends[0][:n_pos], ends[1][:n_pos], self.book.num_nodes())
        pos = np.arange(seeds.shape[0]) if out.batch is not None else first_positions(seeds)
        data, position = self._collate(out)
        if position is not None:
            pos = position[pos]
        at = torch.from_numpy(pos)
        n_src = src.shape[0]
        store = data[edge_type] if self.hetero else data
        if mode == "triplet":
            store.src_index = at[:n_src]
            store.dst_pos_index = at[n_src : 2 * n_src]
            store.dst_neg_index = at[2 * n_src :].view(n_src, -1).squeeze(-1)
        else:
            store.edge_label_index = torch.stack([at[:n_src], at[n_src : 2 * n_src]])
            store.edge_label = label
        if mode == "joint":
            store.dst_neg_index = at[2 * n_src :]
        elif mode == "hard":
            store.dst_neg_index = at[2 * n_src :].view(n_src, -1)
        store.input_id = torch.from_numpy(_input_id(req, n_pos))
        if req.time is not None:
            store.edge_label_time = torch.as_tensor(times)
        return data

    def _hard(
        self, src: np.ndarray, dst: np.ndarray, et: EType, k: int, *, key: int, rng: np.random.Generator
    ) -> np.ndarray:
        """``(B, 2k)`` per-type node IDs: up to ``k`` sampled in-neighbours (along ``et``) of each destination in
        ``dst`` other than its positive's source in ``src``, the rest of the first ``k`` and the last ``k`` random
        nodes of its type."""
        if et[0] != et[2]:
            raise InputError(f"hard negatives drawn from destinations' in-neighbours: {et} joins two node types")
        homo = self._homo(dst, et[2])
        counts, nbrs = self.sampler.in_neighbours(homo, self.book.canonical_etypes.index(et), k, key)
        out = rng.integers(0, self.book.num_nodes(et[2]), (dst.shape[0], 2 * k))
        row = np.repeat(np.arange(dst.shape[0]), counts)
        col = np.arange(row.shape[0]) - np.repeat(np.cumsum(counts) - counts, counts)  # position among its own
        out[row, col] = self.book.map_to_per_ntype(nbrs)[1].numpy()
        mine = out[:, :k] == src[:, None]  # the positive's own source links to v: no negative
        out[:, :k][mine] = rng.integers(0, self.book.num_nodes(et[2]), int(mine.sum()))
        return out

    def _given(self, hard: np.ndarray, d_t: str, rng: np.random.Generator) -> np.ndarray:
        """``(B, 2k)``: the given hard negatives (a random node where one is -1), then ``k`` random nodes."""
        n = self.book.num_nodes(d_t)
        hard = np.asarray(hard, dtype=np.int64).reshape(hard.shape[0], -1)
        out = rng.integers(0, n, (hard.shape[0], 2 * hard.shape[1]))
        given = hard >= 0
        out[:, : hard.shape[1]][given] = hard[given]
        return out

    # -- collation --------------------------------------------------------------------------------
    def _attach(self, nodes: list[tuple[Any, str, np.ndarray]], edges: list[tuple[Any, Any, np.ndarray]]) -> None:
        """Give each ``(store, node type, IDs)`` its ``n_id``, ``x``, ``y`` and further node data, and each
        ``(store, edge type, edge IDs)`` its ``edge_attr``; the dense rows of them all come in one request
        per owning partition."""
        start = time.perf_counter()
        feat, label, has = self.spec.feat_name, self.spec.label_name, self.features.has
        asks, targets = [], []
        for store, ntype, ids in nodes:
            store.n_id = torch.from_numpy(ids)
            if self.spec.sparse_x and has(ntype, feat) and self.features.is_sparse(ntype, feat):
                store.x = sparse_tensor(self.features.lookup_nonzeros(ntype, feat, ids))
            elif has(ntype, feat):
                asks.append((ntype, feat, self._not_cached(store, ntype, ids)))
                targets.append((store, "x"))
            named = ([(label, "y")] if label else []) + [(n, n) for n in self.spec.node_attrs]
            for name, attr in named:
                if has(ntype, name):
                    asks.append((ntype, name, ids))
                    targets.append((store, attr))
        for store, etype, ids in edges:
            if self.spec.edge_feat_name and has(etype, self.spec.edge_feat_name):
                asks.append((etype, self.spec.edge_feat_name, ids))
                targets.append((store, "edge_attr"))
        for (store, attr), rows in zip(targets, self.features.lookup_many(asks, self.spec.wire_dtype, self.allocate)):
            store[attr] = rows
        self._fetch_time += time.perf_counter() - start

    def _not_cached(self, store: Any, ntype: str, ids: np.ndarray) -> np.ndarray:
        """The IDs of ``ids`` whose feature rows are to be fetched: all, or those the device cache lacks (where
        the others go is recorded on ``store``, see :mod:`graphshard.device.rowcache`)."""
        cache = self.row_cache
        if cache is None or cache.name != self.spec.feat_name or not cache.holds(ntype):
            return ids
        hit_pos, hit_slot, miss_pos = cache.split(ntype, ids)
        cached_layout(store, hit_pos, hit_slot, miss_pos, count=int(ids.shape[0]))
        return ids[miss_pos]

    def _collate(self, out) -> tuple[Data | HeteroData, np.ndarray | None]:
        """The batch, and (heterogeneous) where each sampled node went within its type."""
        if not self.hetero:
            data = Data(
                edge_index=torch.from_numpy(np.stack([out.row, out.col])),
                e_id=torch.from_numpy(out.edge),
                num_sampled_nodes=list(out.num_sampled_nodes),
                num_sampled_edges=list(out.num_sampled_edges),
            )
            data.num_nodes = int(out.node.shape[0])
            self._attach(
                [(data, self.book.ntypes[0], out.node)],
                [(data, self.book.canonical_etypes[0], out.edge)] if self.book.canonical_etypes else [],
            )
            if out.batch is not None:
                data.batch = torch.from_numpy(out.batch)
            return data, None
        het = self.sampler.to_hetero(out)
        data = HeteroData()
        for t, ids in het.node.items():
            data[t].num_nodes = int(ids.shape[0])
            data[t].num_sampled_nodes = het.num_sampled_nodes[t]
            if het.batch is not None:
                data[t].batch = torch.from_numpy(het.batch[t])
        for et in het.edge:
            data[et].edge_index = torch.from_numpy(np.stack([het.row[et], het.col[et]]))
            data[et].e_id = torch.from_numpy(het.edge[et])
            data[et].num_sampled_edges = het.num_sampled_edges[et]
        self._attach(
            [(data[t], t, ids) for t, ids in het.node.items()], [(data[et], et, het.edge[et]) for et in het.edge]
        )
        return data, het.position

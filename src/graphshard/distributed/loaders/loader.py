"""Distributed mini-batch loaders yielding PyG ``Data``/``HeteroData``: node seeds
(:class:`DistNeighborLoader`) or edge seeds with negative sampling (:class:`DistLinkNeighborLoader`).

Every rank runs the same number of batches per epoch: at construction the ranks agree on the largest
seed count, and ranks with fewer seeds top their epoch up with repeats of their own seeds. Batches
are built by sampler worker processes (``num_workers > 0``) or in the training process
(``num_workers=0``): by background threads, ``prefetch`` batches ahead of the training loop (its
compute overlaps their sampling and fetching; a second thread starts when the loop waits on idle cores, see
:mod:`.prefetch`), or in-line with ``prefetch=0``. By default (``prefetch=None``) workers keep 2 batches in
flight each, and the training process builds ahead only when its rank has a core to spare or asks another
process for some partition's data (see :mod:`.threads`).
Randomness depends on ``(seed, epoch, batch, rank)`` only, so the batches are the same either way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from ...device.rowcache import DeviceRowCache
from ...device.transfer import DeviceFeeder
from ...errors import InputError
from ...graph import to_numpy
from ...ids import check_range
from ..host.threads import MAX_BUILDERS, builder_nice, prefetch_depth, rank_threads
from ..runtime.graph import DistGraph
from ..transport.wire import STORED
from .batch import BatchMaker, BatchRequest, BatchSpec, stretched
from .prefetch import prefetched
from .workers import WorkerPool

SPLIT_MASKS = ("train_mask", "val_mask", "test_mask")  # node data PyG's loaders carry into batches by default


class _DistLoader:
    def __init__(
        self,
        graph: DistGraph,
        spec: BatchSpec,
        seeds: np.ndarray,
        batch_size: int,
        *,
        shuffle: bool,
        drop_last: bool,
        num_workers: int,
        prefetch: int | None,
        seed: int,
        time: Any,
        label: Any,
        device: Any = None,
        device_cache: DeviceRowCache | None = None,
        transform: Callable[[Any], None] | None = None,
        copy: bool = False,
    ):
        if batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {batch_size}")
        if device_cache is not None and num_workers > 0:
            raise InputError(
                "a device feature cache completes batches built in the training process: use num_workers=0 "
                "(--num-workers 0) with it"
            )
        self.feeder = _feeder(device, device_cache, transform, copy)
        self.device_cache = device_cache
        self.graph, self.spec, self.seeds = graph, spec, seeds
        self.batch_size, self.shuffle, self.seed, self.epoch = batch_size, shuffle, seed, 0
        self.remote = len(graph.near_graphs) + 1 < graph.book.num_partitions()  # some partition is asked for
        if prefetch is None:
            prefetch = 2 if num_workers > 0 else prefetch_depth(self.remote)
        self.prefetch = prefetch
        count = seeds.shape[-1]
        self.time = None if time is None else to_numpy(time)
        self.label = None if label is None else to_numpy(label)
        self.hard: np.ndarray | None = None  # a link loader's given hard negatives, one row per seed edge
        for name, arr in (("time", self.time), ("label", self.label)):
            if arr is not None and arr.shape[0] != count:
                raise InputError(f"{name} has {arr.shape[0]} entries for {count} seeds")
        counts = [int(c) for c in graph.group.all_gather(str(count).encode(), "loader seed counts")]
        if min(counts) == 0 and max(counts) > 0:
            raise InputError(
                f"rank {counts.index(0)} has no seeds while others have up to {max(counts)}: "
                "split the seeds so every rank gets some (node_split with force_even=True)"
            )
        self.epoch_size = max(counts)
        self.num_batches = (self.epoch_size // batch_size) if drop_last else math.ceil(self.epoch_size / batch_size)
        self.rank = graph.group.rank
        self.steps: int | None = None  # batches an epoch, when set: keeping pace with another (batch.stretched)
        self._makers = [self._new_maker()] if num_workers == 0 else []
        self._pool = (
            WorkerPool(
                graph.part_config,
                graph.group.rank,
                graph.group.world_size,
                spec,
                num_workers=num_workers,
                prefetch=prefetch,
                timeout=graph.group.timeout,
                cache=graph.features.cache,
                colocated=graph.colocated,
            )
            if num_workers > 0
            else None
        )

    def __len__(self) -> int:
        return self.num_batches if self.steps is None else self.steps

    def _new_maker(self) -> BatchMaker:
        g, feeder = self.graph, self.feeder
        return BatchMaker(
            self.spec,
            g.group,
            g.sampling_graph,
            g.features,
            book=g.book,
            near=g.near_graphs,
            allocate=feeder.pool.take if feeder is not None and feeder.copying else None,
            row_cache=self.device_cache,
        )

    def _maker(self, j: int) -> BatchMaker:
        """Builder ``j``'s batch maker (each has its own: samplers keep scratch state)."""
        while len(self._makers) <= j:
            self._makers.append(self._new_maker())
        return self._makers[j]

    @property
    def background(self) -> bool:
        """Whether batches are built while the caller computes (sampler workers or a prefetch thread)."""
        return self._pool is not None or self.prefetch > 0

    def _order(self, rng: np.random.Generator) -> np.ndarray:
        count = self.seeds.shape[-1]
        order = rng.permutation(count) if self.shuffle else np.arange(count)
        if count < self.epoch_size:  # top up to the common epoch size with repeats of our own seeds
            order = np.concatenate([order, rng.choice(count, self.epoch_size - count)])
        return order

    def requests(self, epoch: int) -> list[BatchRequest]:
        """The batches of ``epoch`` (deterministic)."""
        rng = np.random.default_rng([self.seed, epoch, self.rank])
        order = self._order(rng)
        reqs = []
        for b in range(self.num_batches):
            take = order[b * self.batch_size : (b + 1) * self.batch_size]
            key = int(np.random.default_rng([self.seed, epoch, self.rank, b]).integers(0, 2**62))
            reqs.append(
                BatchRequest(
                    b,
                    key,
                    self.seeds[..., take],
                    None if self.time is None else self.time[take],
                    label=None if self.label is None else self.label[take],
                    input_id=take,
                    hard=None if self.hard is None else self.hard[take],
                )
            )
        return reqs

    def __iter__(self) -> Iterator[Any]:
        if self.feeder is None:
            return self._host_batches()
        return self.feeder(self._host_batches())

    def _host_batches(self) -> Iterator[Any]:
        self.epoch += 1
        reqs = stretched(self.requests, self.epoch, self.num_batches, len(self))
        if self._pool is not None:
            yield from self._pool.run(reqs)
        else:
            if not self._makers:  # built with workers, and closed since
                raise InputError("the loader was closed: its sampler workers are gone")
            if self.prefetch > 0:
                yield from prefetched(
                    self._maker,
                    reqs,
                    self.prefetch,
                    self.graph.group.timeout,
                    where=f"rank {self.rank}: ",
                    max_builders=MAX_BUILDERS,
                    cores=rank_threads(),
                    nice=builder_nice(self.remote),
                )
            else:
                for r in reqs:
                    yield self._makers[0](r)

    def close(self) -> None:
        """Stop the sampler workers (all ranks close their loaders; call before leaving RPC)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> _DistLoader:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is not None and self._pool is not None:
            self._pool.close(abort=True)
            self._pool = None
        self.close()


def _feeder(
    device: Any, cache: DeviceRowCache | None, transform: Callable[[Any], None] | None, copy: bool
) -> DeviceFeeder | None:
    """What takes the loader's batches to ``device`` (None: they stay as built, on the host)."""
    if device is None and cache is None and transform is None and not copy:
        return None
    where = torch.device(device) if device is not None else torch.device("cpu")
    # a cache on a CPU "device" takes the device path with plain copies: its batches need completing
    return DeviceFeeder(where, prepare=transform, cache=cache, copy_on_cpu=copy or cache is not None)


class DistNeighborLoader(_DistLoader):
    """Mini-batches of seed nodes with their sampled multi-hop neighbourhoods, as PyG ``Data`` or ``HeteroData``.

    ``Data`` for one node and edge type, ``HeteroData`` otherwise, holding ``n_id``, ``e_id``, ``x``, ``y``,
    ``edge_index``, ``batch_size``, ``num_sampled_nodes``/``num_sampled_edges`` and ``input_id`` (as in PyG:
    each seed's position in ``input_nodes``); the first ``batch_size`` nodes are the batch's distinct seeds
    (a repeated seed appears once, with the ``input_id`` of its first occurrence in the batch). Every rank
    runs the same number of batches per epoch (construction is collective over the graph's group); iterate
    it once per epoch, and `close` it (or use it as a context manager) before leaving RPC.

    Args:
        graph: the distributed graph to sample from.
        num_neighbors: the fanout of each hop (``-1``: every in-neighbour), a list, or a dict of such
            lists per edge type.
        input_nodes: this rank's seeds: per-type node IDs of ``input_type`` (e.g. from `node_split`).
        batch_size: seeds per batch on this rank.
        input_type: the node type of the seeds; needed for a graph of several node types.
        shuffle: shuffle the seeds every epoch.
        drop_last: leave out the last batch of an epoch when it is not full.
        replace: sample neighbours with replacement.
        disjoint: give every seed its own subtree.
        time_attr: with ``input_time``, temporal sampling: the node attribute holding each node's time;
            neighbours are never newer than their seed, and seeds are kept as given, one subtree each.
        input_time: each seed's time (temporal sampling, with ``time_attr``).
        feat_name: the node feature that becomes ``x`` where a node type has it.
        label_name: the node data that becomes ``y`` where a node type has it; None: no ``y``.
        num_workers: sampler worker processes building the batches; 0: built in the training process.
        prefetch: batches built ahead of the training loop (0: built in-line); None: 2 per worker, or,
            without workers, ahead only when the rank has a core to spare or reads other processes' data.
        seed: the random seed; batches depend on ``(seed, epoch, batch, rank)`` only.
        sparse_x: CSR features come as sparse COO ``x``.
        wire_dtype: how other processes' dense feature rows travel: ``stored``, or ``float16``/``bfloat16``
            (half the bytes, rounded; see `graphshard.distributed.transport.wire`).
        edge_feat_name: edges get that edge feature as ``edge_attr``.
        node_attrs: further node data by name; None: the split masks ``train_mask``, ``val_mask``,
            ``test_mask`` where a type has them, as PyG's loaders give them; ``()`` for none.
        device: for a GPU, e.g. ``"cuda:0"``: hands out batches on that device, copied ahead of the one being
            computed on through reused pinned buffers on a stream of their own (see
            `graphshard.device.transfer`; ``n_id``, ``e_id`` and ``input_id`` stay on the host).
        device_cache: a `DeviceRowCache` (e.g. from `build_device_cache`) that keeps the rows read most on the
            device, so that only the others are fetched; needs ``num_workers=0``.
        transform: ``transform(batch)`` runs on the host before the copies to the device (to attach what the
            loss reads, so it travels the same way).
        copy: take the device path even when the device is the CPU (each batch copied through the reused
            buffers; rehearses a GPU's path on a machine without one).

    Raises:
        InputError: no ``input_type`` on a graph of several node types; ``batch_size`` below 1; a
            ``device_cache`` with workers; ``input_time`` of another length than the seeds; an unknown
            ``wire_dtype``; a rank without seeds while others have some.
        IDRangeError: a seed ID out of range.
    """

    def __init__(
        self,
        graph: DistGraph,
        num_neighbors: Any,
        input_nodes: Any,
        batch_size: int = 1024,
        *,
        input_type: str | None = None,
        shuffle: bool = False,
        drop_last: bool = False,
        replace: bool = False,
        disjoint: bool = False,
        time_attr: str | None = None,
        input_time: Any = None,
        feat_name: str = "feat",
        label_name: str | None = "label",
        num_workers: int = 0,
        prefetch: int | None = None,
        seed: int = 0,
        sparse_x: bool = False,
        wire_dtype: str = STORED,
        edge_feat_name: str | None = None,
        node_attrs: Any = None,
        device: Any = None,
        device_cache: DeviceRowCache | None = None,
        transform: Callable[[Any], None] | None = None,
        copy: bool = False,
    ):
        if input_type is None and len(graph.ntypes) > 1:
            raise InputError(f"input_type is needed for a graph with node types {graph.ntypes}")
        seeds = to_numpy(input_nodes).astype(np.int64).reshape(-1)
        check_range(seeds, graph.num_nodes(input_type), f"input node ID of type {input_type or graph.ntypes[0]!r}")
        spec = BatchSpec(
            num_neighbors,
            replace,
            disjoint,
            time_attr,
            feat_name=feat_name,
            label_name=label_name,
            input_type=input_type,
            sparse_x=sparse_x,
            wire_dtype=wire_dtype,
            edge_feat_name=edge_feat_name,
            node_attrs=SPLIT_MASKS if node_attrs is None else tuple(node_attrs),
        )
        super().__init__(
            graph,
            spec,
            seeds,
            batch_size,
            shuffle=shuffle,
            drop_last=drop_last,
            num_workers=num_workers,
            prefetch=prefetch,
            seed=seed,
            time=input_time,
            label=None,
            device=device,
            device_cache=device_cache,
            transform=transform,
            copy=copy,
        )


class DistLinkNeighborLoader(_DistLoader):
    """Mini-batches of seed edges with the sampled neighbourhoods of their endpoints, and negative samples.

    ``input_id`` is each positive edge's position in ``edge_label_index`` (as in PyG). Every rank runs the
    same number of batches per epoch (construction is collective over the graph's group); iterate it once
    per epoch, and `close` it (or use it as a context manager) before leaving RPC.

    Args:
        graph: the distributed graph to sample from.
        num_neighbors: the fanout of each hop (``-1``: every in-neighbour), a list, or a dict of such
            lists per edge type.
        edge_label_index: this rank's seed edges: a ``(2, E)`` array of per-type source/destination IDs of
            ``edge_type``.
        batch_size: seed edges per batch on this rank.
        edge_type: the edge type of the seed edges (as `DistGraph.canonical_etype` takes it); None on a graph
            of a single edge type.
        edge_label: a label per seed edge (with ``"binary"``, the positives' ``edge_label``, negatives 0).
        neg_sampling: None: no negatives; ``"binary"`` adds ``neg_amount × E`` random pairs and ``edge_label``
            (1/0, or the given ``edge_label`` then 0); ``"triplet"`` adds
            ``src_index``/``dst_pos_index``/``dst_neg_index``; ``"joint"`` adds ``dst_neg_index``,
            ``ceil(neg_amount)`` random destinations every positive of the batch shares; ``"hard"`` adds
            ``dst_neg_index`` ``(B, 2k)``: sampled in-neighbours of each destination, or ``hard_negatives``,
            then random ones.
        neg_amount: negatives per positive.
        shuffle: shuffle the seed edges every epoch.
        drop_last: leave out the last batch of an epoch when it is not full.
        replace: sample neighbours with replacement.
        disjoint: give every seed its own subtree.
        time_attr: with ``edge_label_time``, temporal sampling: the node attribute holding each node's time.
        edge_label_time: each seed edge's time (temporal sampling, with ``time_attr``).
        feat_name: the node feature that becomes ``x`` where a node type has it.
        label_name: the node data that becomes ``y`` where a node type has it; None: no ``y``.
        num_workers: sampler worker processes building the batches; 0: built in the training process.
        prefetch: batches built ahead of the training loop, as for `DistNeighborLoader`.
        seed: the random seed; batches depend on ``(seed, epoch, batch, rank)`` only.
        exclude_seed_edges: the sampled neighbourhoods leave out the seed edges themselves (and their
            reverses).
        sparse_x: CSR features come as sparse COO ``x``.
        wire_dtype: how other processes' dense rows travel: ``stored``, ``float16`` or ``bfloat16`` (see
            `graphshard.distributed.transport.wire`).
        edge_feat_name: as for `DistNeighborLoader`.
        node_attrs: as for `DistNeighborLoader`.
        device: as for `DistNeighborLoader`.
        device_cache: as for `DistNeighborLoader`.
        transform: as for `DistNeighborLoader`.
        copy: as for `DistNeighborLoader`.
        hard_negatives: with ``neg_sampling="hard"``, given hard negatives: one row of per-type destination
            IDs per seed edge (-1: none).

    Raises:
        InputError: an unknown or ambiguous ``edge_type``; ``edge_label_index`` not of shape ``(2, E)``;
            ``batch_size`` below 1; an unknown ``neg_sampling`` or ``wire_dtype``; ``"joint"`` or ``"hard"``
            with temporal sampling; ``neg_amount`` not positive; ``edge_label`` or ``edge_label_time`` of
            another length than the seeds; ``hard_negatives`` without ``"hard"`` or not one row per edge; a
            ``device_cache`` with workers; a rank without seeds while others have some.
        IDRangeError: a seed or hard negative ID out of range.
    """

    def __init__(
        self,
        graph: DistGraph,
        num_neighbors: Any,
        edge_label_index: Any,
        batch_size: int = 1024,
        *,
        edge_type: Any = None,
        edge_label: Any = None,
        neg_sampling: str | None = None,
        neg_amount: float = 1.0,
        shuffle: bool = False,
        drop_last: bool = False,
        replace: bool = False,
        disjoint: bool = False,
        time_attr: str | None = None,
        edge_label_time: Any = None,
        feat_name: str = "feat",
        label_name: str | None = None,
        num_workers: int = 0,
        prefetch: int | None = None,
        seed: int = 0,
        exclude_seed_edges: bool = False,
        sparse_x: bool = False,
        wire_dtype: str = STORED,
        edge_feat_name: str | None = None,
        node_attrs: Any = None,
        device: Any = None,
        device_cache: DeviceRowCache | None = None,
        transform: Callable[[Any], None] | None = None,
        copy: bool = False,
        hard_negatives: Any = None,
    ):
        et = graph.canonical_etype(edge_type)
        pairs = to_numpy(edge_label_index).astype(np.int64)
        if pairs.ndim != 2 or pairs.shape[0] != 2:
            raise InputError(f"edge_label_index must have shape (2, E), got {pairs.shape}")
        check_range(pairs[0], graph.num_nodes(et[0]), f"source node ID of {et}")
        check_range(pairs[1], graph.num_nodes(et[2]), f"destination node ID of {et}")
        spec = BatchSpec(
            num_neighbors,
            replace,
            disjoint,
            time_attr,
            feat_name=feat_name,
            label_name=label_name,
            edge_type=et,
            neg_mode=neg_sampling,
            neg_amount=neg_amount,
            exclude_seed_edges=exclude_seed_edges,
            sparse_x=sparse_x,
            wire_dtype=wire_dtype,
            edge_feat_name=edge_feat_name,
            node_attrs=SPLIT_MASKS if node_attrs is None else tuple(node_attrs),
        )
        super().__init__(
            graph,
            spec,
            pairs,
            batch_size,
            shuffle=shuffle,
            drop_last=drop_last,
            num_workers=num_workers,
            prefetch=prefetch,
            seed=seed,
            time=edge_label_time,
            label=edge_label,
            device=device,
            device_cache=device_cache,
            transform=transform,
            copy=copy,
        )
        if hard_negatives is not None:
            hard = to_numpy(hard_negatives).astype(np.int64)
            hard = hard.reshape(hard.shape[0], -1)
            if neg_sampling != "hard" or hard.shape[0] != pairs.shape[1]:
                raise InputError(
                    f"hard_negatives: one row per edge of edge_label_index ({pairs.shape[1]}) with neg_sampling "
                    f"'hard', got {hard.shape[0]} rows with {neg_sampling!r}"
                )
            check_range(hard[hard >= 0], graph.num_nodes(et[2]), f"hard negative of {et}")
            self.hard = hard

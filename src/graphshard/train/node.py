"""Node classification on one rank: DistGraph + DistNeighborLoader + a model under DDP (gloo).
Evaluation computes every node's output layer by layer (exact; or by sampled mini-batches with
``eval_fanouts``), and each rank counts its share of the validation/test nodes; counts are summed over ranks."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..device.choice import rank_device
from ..distributed.collectives import all_gather_bytes, all_reduce_sum
from ..distributed.graph import DistGraph
from ..distributed.loader import DistNeighborLoader
from ..distributed.runtime import Session
from ..distributed.split import rank_partition, split_owned
from ..distributed.tensor import DistTensor
from ..errors import InputError
from . import timing
from .checks import (
    check_finite_features,
    classes_of,
    label_summary,
    merge_summaries,
    out_of_range,
    refuse_out_of_range,
    split_node_text,
)
from .embeddings import Outputs, predict, representations, save_tables
from .inputs import ModelInputs, build_model, cache_summary, device_cache, feature_cache, rows_of
from .loop import Trainer, open_graph
from .model_check import check_custom_model
from .options import TrainOptions

log = logging.getLogger(__name__)


def target_type(g: DistGraph, opts: TrainOptions, label: str) -> str:
    """``opts.target``, or the only node type, or the only node type with labels."""
    if opts.target:
        if opts.target not in g.ntypes:
            raise InputError(f"target node type {opts.target!r} is not in the graph (types: {g.ntypes})")
        return opts.target
    if len(g.ntypes) == 1:
        return g.ntypes[0]
    labelled = [t for t in g.ntypes if label in g.nodes[t].data]
    if len(labelled) == 1:
        return labelled[0]
    raise InputError(f"node types with {label!r}: {labelled}; choose one with --target")


@dataclass
class NodeTask:
    """Node classification as one rank sees it: the target type, the class count, and this rank's nodes of each
    split with their labels only. Each rank reads the masks of its own partition and the labels of its own
    split nodes: O(its partition), however large the graph (the labels of nodes dealt to it from another
    partition come from their owners)."""

    target: str
    classes: int
    split: dict[str, torch.Tensor]  # this rank's nodes of each split: per-type new IDs, ascending
    ids: np.ndarray  # every node of this rank's splits, ascending
    labels: np.ndarray  # their labels (int64)

    def __post_init__(self) -> None:
        # where each node's label is, by offset from the first ID, while the IDs span at most 4 x their number
        # (a rank's split nodes lie mostly in its own partition's range): a batch's seeds are found by one
        # read each instead of a binary search of scattered reads (~0.3 ms a batch of 512 on 250,000 IDs)
        span = int(self.ids[-1] - self.ids[0]) + 1 if self.ids.size else 0
        self._at: np.ndarray | None = None
        if 0 < span <= 4 * self.ids.size:
            self._at = np.zeros(span, dtype=np.int32 if self.ids.size < 2**31 else np.int64)
            self._at[self.ids - self.ids[0]] = np.arange(self.ids.size)

    def labels_of(self, ids: np.ndarray) -> np.ndarray:
        """The labels of nodes of this rank's splits."""
        if self._at is not None:
            return self.labels[self._at[ids - self.ids[0]]]
        return self.labels[np.searchsorted(self.ids, ids)]


def _data(g: DistGraph, ntype: str, names: list[str]) -> dict[str, DistTensor]:
    data = g.nodes[ntype].data
    for name in names:
        if name not in data:
            raise InputError(f"node type {ntype!r} has no {name!r} data (it has {data.keys()})")
    return {name: data[name] for name in names}


def node_task(s: Session, g: DistGraph, opts: TrainOptions) -> NodeTask:
    """The node type to classify, this rank's split nodes and their labels, and the number of classes
    (every split node's label checked against it, each partition's by one rank). Collective."""
    label = opts.label or "label"
    target = target_type(g, opts, label)
    book, ntype = g.get_partition_book(), (target if len(g.ntypes) > 1 else None)
    num_parts = book.num_partitions()
    part, trainer = rank_partition(s.rank, s.world_size, num_parts)
    data = _data(g, target, [label, *opts.mask_names.values()])
    lo, hi = book.node_range(part, ntype)
    own = torch.arange(lo, hi)
    masks = {k: data[name][own].numpy().astype(bool) for k, name in opts.mask_names.items()}
    split = {
        k: torch.from_numpy(split_owned(s.ctx, lo + np.flatnonzero(m), num_parts, what=f"{k} split"))
        for k, m in masks.items()
    }
    used = np.zeros(0, dtype=np.int64)  # the partition's split nodes, whose labels its first trainer checks
    if masks and trainer == 0:
        used = lo + np.flatnonzero(np.logical_or.reduce(list(masks.values())))
    classes = _class_count(s, g, target, used, data[label][torch.from_numpy(used)].numpy().astype(np.int64), opts)
    ids = np.unique(np.concatenate([np.zeros(0, dtype=np.int64), *(v.numpy() for v in split.values())]))
    labels = data[label][torch.from_numpy(ids)].numpy().astype(np.int64)
    return NodeTask(target, classes, split, ids, labels)


def _class_count(
    s: Session, g: DistGraph, target: str, used: np.ndarray, labels: np.ndarray, opts: TrainOptions
) -> int:
    """The number of classes, from every partition's split nodes (``used``: this rank's share of them, with
    their ``labels``): the checks of :func:`num_classes_of`, the same error on every rank."""
    cfg, book = g.config, g.get_partition_book()
    declared, source = (
        (opts.num_classes, "--num-classes")
        if opts.num_classes is not None
        else (cfg.num_classes, f"the partition config {cfg.path}")
    )

    def where(node: int) -> str:
        part = int(g.served.stored_book.nid2partid(np.array([node]), target)[0])
        return f", label read from {cfg.part_path(part, 'node_feats')}"

    text = split_node_text(target, lambda ids: book.to_original(target, ids), where)
    told = all_gather_bytes(s.ctx, json.dumps(label_summary(used, labels)).encode(), "label check")
    classes = classes_of(merge_summaries([tuple(json.loads(t)) for t in told]), declared, text)
    told = all_gather_bytes(s.ctx, json.dumps(out_of_range(used, labels, classes)).encode(), "label check")
    found = [tuple(f) for f in (json.loads(t) for t in told) if f is not None]
    refuse_out_of_range(min(found) if found else None, classes, declared, source, text)
    return classes


def train_node(s: Session, opts: TrainOptions) -> dict[str, Any]:
    """Train and evaluate; returns the metrics (the same on every rank)."""
    torch.manual_seed(opts.seed)
    g = open_graph(opts)
    task = node_task(s, g, opts)
    target, classes, split, world = task.target, task.classes, task.split, s.world_size
    ntype = target if len(g.ntypes) > 1 else None
    if not opts.allow_nonfinite:
        check_finite_features(g, opts.feat or "feat")
    device = rank_device(opts.device).device
    cache = feature_cache(g, opts, {target: split["train"].numpy()})
    on_device = device_cache(g, opts, {target: split["train"].numpy()}, device)
    inputs = ModelInputs(g, opts)
    model = build_model(opts, inputs, classes, [target])
    check_custom_model(g, opts, model, inputs, target, classes, split["train"])

    outputs = Outputs(s, g, model, inputs, opts, [target], "node-outputs")

    def evaluate(ids: torch.Tensor) -> float:
        """Accuracy of the current weights on ``ids`` (this rank's share; counts summed over ranks). Sampled
        evaluation (``--eval-fanouts``) computes just these nodes, not every node's outputs."""
        if opts.eval_fanouts is not None:
            out = predict(g, model, inputs, target, ids, opts)
            pred = out.argmax(1).numpy() if out.numel() else np.zeros(0, dtype=np.int64)
        else:
            pred = outputs.get()[target][ids].argmax(1).numpy()
        own = ids.numpy()
        right = (pred == task.labels_of(own)).sum()
        counts = all_reduce_sum(s.ctx, np.array([right, own.size], dtype=np.int64), "evaluation")
        return float(counts[0] / max(1, counts[1]))

    def labels(batch: Any) -> None:
        """On the host, before the batch goes to the device: its seeds' labels (seeds are this rank's)."""
        store = batch[target] if inputs.hetero else batch
        store.y_seed = torch.from_numpy(task.labels_of(store.n_id[: store.batch_size].numpy()))

    def loss(ddp: torch.nn.Module, batch: Any) -> torch.Tensor:
        outputs.changed()  # a training step follows: outputs computed before it are stale
        store = batch[target] if inputs.hetero else batch
        out = rows_of(ddp(*inputs(batch)), target)[: store.batch_size]
        return F.cross_entropy(out.float(), store.y_seed)

    trainer = Trainer(s, g, opts, model, inputs, metric="val_acc")
    loader = DistNeighborLoader(
        g,
        opts.fanouts,
        split["train"],
        math.ceil(opts.batch_size / world),
        input_type=ntype,
        shuffle=True,
        num_workers=opts.num_workers,
        seed=opts.seed,
        label_name=None,
        wire_dtype=opts.wire_dtype,
        **inputs.loader_options(),
        device=trainer.device,
        device_cache=on_device,
        copy=opts.rehearse,
        transform=labels,
    )
    history = trainer.fit(loader, loss, lambda: {"val_acc": evaluate(split["val"])})
    metrics = {
        "task": "node",
        "epochs": history,
        "world_size": world,
        "num_parts": g.served.stored_book.num_partitions(),
    }
    metrics |= trainer.final_test(lambda: {"acc": evaluate(split["test"])}, outputs.changed)
    if opts.save_embeddings:  # of the selected epoch's weights (the test evaluation computed the outputs)
        with timing.phase("embeddings_s"):
            save_tables(s, g, representations(g, model, inputs, opts, outputs), opts.save_embeddings)
    metrics["inference_s"] = outputs.seconds
    metrics.update(cache_summary(s, cache or on_device))
    return metrics

"""Node tasks on one rank — classification, multi-label classification, regression (:mod:`.labels`):
DistGraph + DistNeighborLoader + a model under DDP, trained on the kind's loss (:mod:`.losses`).
Evaluation computes every node's output layer by layer (exact; or by sampled mini-batches with
``eval_fanouts``); each rank predicts its share of the validation/test nodes, and the metrics are computed
from every rank's predictions together (:mod:`.metrics`)."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import KW_ONLY, dataclass
from typing import Any

import numpy as np
import torch

from ..device.choice import rank_device
from ..distributed.loaders.loader import DistNeighborLoader
from ..distributed.ranks.collectives import all_gather_bytes
from ..distributed.remote.tensor import DistTensor
from ..distributed.runtime.graph import DistGraph
from ..distributed.runtime.session import Session
from ..distributed.runtime.split import rank_partition, split_owned
from ..errors import InputError
from ..format.config import PartitionConfig
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
from .inputs import (
    ModelInputs,
    build_model,
    cache_summary,
    device_cache,
    feature_cache,
    rows_of,
    training_loader_options,
)
from .labels import as_targets, kind_of, problem, width
from .loop import Trainer, open_graph
from .losses import task_loss
from .metrics import chosen_metrics, exact_metrics
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
    """A node task as one rank sees it: the target type, the label kind (:mod:`.labels`), the model's output
    width (classes, or the label's columns), and this rank's nodes of each split with their labels only. Each
    rank reads the masks of its own partition and the labels of its own split nodes: O(its partition), however
    large the graph (the labels of nodes dealt to it from another partition come from their owners)."""

    target: str
    classes: int  # the output width: classes (classification), labels (multilabel) or target columns
    split: dict[str, torch.Tensor]  # this rank's nodes of each split: per-type new IDs, ascending
    ids: np.ndarray  # every node of this rank's splits, ascending
    _: KW_ONLY
    labels: np.ndarray  # their labels, as the loss reads them (labels.as_targets)
    kind: str = "classification"

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
    """The node type to learn, this rank's split nodes and their labels, the label kind and the output width
    (every split node's label checked against them, each partition's by one rank). Collective."""
    label = opts.label or "label"
    target = target_type(g, opts, label)
    book, ntype = g.get_partition_book(), (target if len(g.ntypes) > 1 else None)
    num_parts = book.num_partitions()
    part, trainer = rank_partition(s.rank, s.world_size, num_parts)
    data = _data(g, target, [label, *opts.mask_names.values()])
    held = data[label]
    row_shape = tuple(held.shape[1:])
    dtype = held[torch.zeros(0, dtype=torch.int64)].dtype  # a read of no rows: the stored dtype
    kind = kind_of(not dtype.is_floating_point, row_shape, opts.label_kind, f"label {label!r} of {target!r}")
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
    checked = held[torch.from_numpy(used)].numpy()
    if kind == "classification":
        classes = _class_count(s, g, target, used, labels=checked.reshape(-1).astype(np.int64), opts=opts)
    else:
        _check_labels(s, g, target, kind, used=used, labels=checked)
        classes = width(row_shape)
    ids = np.unique(np.concatenate([np.zeros(0, dtype=np.int64), *(v.numpy() for v in split.values())]))
    labels = as_targets(kind, held[torch.from_numpy(ids)].numpy())
    return NodeTask(
        target, classes, split, ids, labels=labels.reshape(-1) if kind == "classification" else labels, kind=kind
    )


def _check_labels(s: Session, g: DistGraph, target: str, kind: str, *, used: np.ndarray, labels: np.ndarray) -> None:
    """Multi-label entries 0 or 1, regression targets finite, in every partition's split nodes (``used``: this
    rank's share, with their ``labels``): the first bad node by ID named on every rank alike."""
    found = problem(kind, labels)
    mine = None if found is None else (int(used[found.position]), found.why)
    told = [json.loads(t) for t in all_gather_bytes(s.ctx, json.dumps(mine).encode(), "label check")]
    bad = min((tuple(t) for t in told if t is not None), default=None)
    if bad is not None:
        book, cfg = g.get_partition_book(), g.config
        orig = int(book.to_original(target, torch.tensor([bad[0]]))[0])
        part = int(g.served.stored_book.nid2partid(np.array([bad[0]]), target)[0])
        raise InputError(
            f"{target!r} node {orig} (original ID, label read from {cfg.part_path(part, 'node_feats')}) of a "
            f"train/val/test split: {bad[1]}"
        )


def _class_count(
    s: Session, g: DistGraph, target: str, used: np.ndarray, *, labels: np.ndarray, opts: TrainOptions
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
    refuse_out_of_range(min(found) if found else None, classes, declared, source, node_text=text)
    return classes


def node_loader(
    g: DistGraph,
    opts: TrainOptions,
    inputs: ModelInputs,
    task: NodeTask,
    *,
    world: int,
    device: torch.device,
    device_cache: Any = None,
) -> DistNeighborLoader:
    """The training batches of a node task: its training nodes with their neighbourhoods, each batch's seeds'
    labels (``y_seed``) attached on the host, before the batch goes to the device (seeds are this rank's)."""
    target = task.target

    def labels(batch: Any) -> None:
        store = batch[target] if inputs.hetero else batch
        store.y_seed = torch.from_numpy(task.labels_of(store.n_id[: store.batch_size].numpy()))

    return DistNeighborLoader(
        g,
        opts.fanouts,
        task.split["train"],
        math.ceil(opts.batch_size / world),
        input_type=target if len(g.ntypes) > 1 else None,
        label_name=None,
        **training_loader_options(opts, inputs, device=device, device_cache=device_cache),
        transform=labels,
    )


def train_node(s: Session, opts: TrainOptions, cfg: PartitionConfig | None = None) -> dict[str, Any]:
    """Train and evaluate; returns the metrics (the same on every rank)."""
    torch.manual_seed(opts.seed)
    g = open_graph(opts, cfg)
    task = node_task(s, g, opts)
    target, classes, split, world = task.target, task.classes, task.split, s.world_size
    if not opts.allow_nonfinite:
        check_finite_features(g, opts.feat or "feat")
    device = rank_device(opts.device).device
    cache = feature_cache(g, opts, {target: split["train"].numpy()})
    on_device = device_cache(g, opts, {target: split["train"].numpy()}, device)
    inputs = ModelInputs(g, opts)
    model = build_model(opts, inputs, classes, [target])
    check_custom_model(g, opts, model, inputs, ntype=target, out_dim=classes, seeds=split["train"])

    outputs = Outputs(s, g, model, inputs, opts=opts, types=[target], name="node-outputs")
    names = chosen_metrics(opts.metric, task.kind)
    computed = [*names, "accuracy"] if task.kind == "classification" and "accuracy" not in names else names
    loss_of = task_loss(s.ctx, opts, task.kind, task.labels_of(split["train"].numpy()), width=classes)

    def evaluate(ids: torch.Tensor, prefix: str) -> dict[str, float | None]:
        """The metrics of the current weights on ``ids`` (this rank's share; computed from every rank's
        predictions: :func:`.metrics.exact_metrics`). Sampled evaluation (``--eval-fanouts``) computes just
        these nodes, not every node's outputs."""
        if opts.eval_fanouts is not None:
            out = predict(g, model, inputs, target, ids=ids, opts=opts) if ids.numel() else torch.zeros((0, classes))
        else:
            out = outputs.get()[target][ids]
        targets = torch.from_numpy(task.labels_of(ids.numpy()))
        found = exact_metrics(s.ctx, task.kind, computed, out, targets=targets, classes=classes)
        if "accuracy" in found:  # also under the key of earlier releases
            found["acc"] = found["accuracy"]
        return {f"{prefix}{m}": v for m, v in found.items()}

    def loss(ddp: torch.nn.Module, batch: Any) -> torch.Tensor:
        outputs.changed()  # a training step follows: outputs computed before it are stale
        store = batch[target] if inputs.hetero else batch
        out = rows_of(ddp(*inputs(batch)), target)[: store.batch_size]
        return loss_of(out, store.y_seed)

    selects = "acc" if names[0] == "accuracy" else names[0]  # accuracy by the key of earlier releases
    trainer = Trainer(s, g, opts, model, inputs=inputs, metric=f"val_{selects}")
    loader = node_loader(g, opts, inputs, task, world=world, device=trainer.device, device_cache=on_device)
    history = trainer.fit(loader, loss, lambda: evaluate(split["val"], "val_"))
    metrics = {
        "task": "node",
        "label_kind": task.kind,
        "epochs": history,
        "world_size": world,
        "num_parts": g.served.stored_book.num_partitions(),
    }
    metrics |= trainer.final_test(lambda: evaluate(split["test"], ""), outputs.changed)
    metrics |= {f"{k}_metrics": {m: metrics.get(f"{k}_{m}") for m in names} for k in ("val", "test")}
    if opts.save_embeddings:  # of the selected epoch's weights (the test evaluation computed the outputs)
        with timing.phase("embeddings_s"):
            save_tables(s, g, representations(g, model, inputs, opts, outputs=outputs), opts.save_embeddings)
    metrics["inference_s"] = outputs.seconds
    metrics.update(cache_summary(s, cache or on_device))
    return metrics

"""Node classification on one rank: DistGraph + DistNeighborLoader + a model under DDP (gloo).
Evaluation computes every node's output layer by layer (exact; or by sampled mini-batches with
``eval_fanouts``), and each rank counts its share of the validation/test nodes; counts are summed over ranks."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..distributed.collectives import all_reduce_sum
from ..distributed.graph import DistGraph
from ..distributed.loader import DistNeighborLoader
from ..distributed.runtime import Session
from ..distributed.split import node_split
from ..errors import InputError
from . import timing
from .checks import check_finite_features, num_classes_of
from .embeddings import Outputs, predict, representations, save_tables
from .inputs import ModelInputs, build_model, cache_summary, feature_cache, rows_of
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


def _full(g: DistGraph, ntype: str, name: str) -> np.ndarray:
    data = g.nodes[ntype].data
    if name not in data:
        raise InputError(f"node type {ntype!r} has no {name!r} data (it has {data.keys()})")
    return data[name][torch.arange(g.num_nodes(ntype))].numpy()


def node_task(g: DistGraph, opts: TrainOptions) -> tuple[str, np.ndarray, dict[str, np.ndarray], int]:
    """The node type to classify, its labels and split masks, and the number of classes."""
    label = opts.label or "label"
    target = target_type(g, opts, label)
    book = g.get_partition_book()
    labels = _full(g, target, label).astype(np.int64)
    masks = {k: _full(g, target, name).astype(bool) for k, name in opts.mask_names.items()}
    cfg = g.config
    declared, source = (
        (opts.num_classes, "--num-classes")
        if opts.num_classes is not None
        else (cfg.num_classes, f"the partition config {cfg.path}")
    )

    def where(node: int) -> str:
        part = int(g.served.stored_book.nid2partid(np.array([node]), target)[0])
        return f", label read from {cfg.part_path(part, 'node_feats')}"

    classes = num_classes_of(labels, masks, declared, target, lambda ids: book.to_original(target, ids), source, where)
    return target, labels, masks, classes


def train_node(s: Session, opts: TrainOptions) -> dict[str, Any]:
    """Train and evaluate; returns the metrics (the same on every rank)."""
    torch.manual_seed(opts.seed)
    g = open_graph(opts)
    target, labels, masks, classes = node_task(g, opts)
    book, world = g.get_partition_book(), s.world_size
    ntype = target if len(g.ntypes) > 1 else None
    split = {k: node_split(m, book, ntype, rank=s.rank, world_size=world) for k, m in masks.items()}
    if not opts.allow_nonfinite:
        check_finite_features(g, opts.feat or "feat")
    cache = feature_cache(g, opts, {target: split["train"].numpy()})
    inputs = ModelInputs(g, opts)
    model = build_model(opts, inputs, classes, [target])
    check_custom_model(g, opts, model, inputs, target, classes, split["train"])

    outputs = Outputs(s, g, model, inputs, opts, [target], "node-outputs")
    y = torch.from_numpy(labels)  # every rank holds all labels: batches need not fetch them

    def evaluate(ids: torch.Tensor) -> float:
        """Accuracy of the current weights on ``ids`` (this rank's share; counts summed over ranks). Sampled
        evaluation (``--eval-fanouts``) computes just these nodes, not every node's outputs."""
        if opts.eval_fanouts is not None:
            out = predict(g, model, inputs, target, ids, opts)
            pred = out.argmax(1).numpy() if out.numel() else np.zeros(0, dtype=np.int64)
        else:
            pred = outputs.get()[target][ids].argmax(1).numpy()
        own = ids.numpy()
        counts = all_reduce_sum(s.ctx, np.array([(pred == labels[own]).sum(), own.size], dtype=np.int64), "evaluation")
        return float(counts[0] / max(1, counts[1]))

    def loss(ddp: torch.nn.Module, batch: Any) -> torch.Tensor:
        outputs.changed()  # a training step follows: outputs computed before it are stale
        store = batch[target] if inputs.hetero else batch
        out = rows_of(ddp(*inputs(batch)), target)[: store.batch_size]
        return F.cross_entropy(out, y[store.n_id[: store.batch_size]])

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
    metrics.update(cache_summary(s, cache))
    return metrics

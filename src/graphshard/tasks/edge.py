"""Edge tasks on one rank: the labels of existing edges of one type — classes, 0/1 labels or regression targets
(:mod:`.labels`) — learnt by an encoder and a decoder of the edge's two ends (:mod:`graphshard.models.edge`)
under DDP, on the kind's loss (:mod:`.losses`).

Each partition's edges of the type (those into its nodes) are its ranks' to train on and evaluate, cut evenly
among them; an edge's label, split masks and features are read from its own partition. Training batches are
the training edges with the sampled neighbourhoods of their ends (the edges stay in the graph: a labelled edge
is there when it is predicted, unlike a held-out link). Evaluation computes every node's output layer by layer
(exact), decodes each rank's validation or test edges from both ends' rows, and computes the metrics from every
rank's predictions together (:mod:`.metrics`)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..device.choice import rank_device
from ..distributed.loaders.loader import DistLinkNeighborLoader
from ..distributed.ranks.collectives import all_gather_bytes
from ..distributed.runtime.graph import DistGraph
from ..distributed.runtime.session import Session
from ..errors import InputError
from ..format.config import PartitionConfig
from ..graph import EType
from ..models.edge import EdgeModel, edge_decoder
from . import timing
from .checks import check_finite_features
from .embeddings import Outputs, representations, save_tables
from .inputs import ModelInputs, build_model, cache_summary, device_cache, feature_cache, training_loader_options
from .labels import as_targets, kind_of, problem, width
from .loop import Trainer, open_graph
from .losses import task_loss
from .metrics import chosen_metrics, exact_metrics
from .model_check import check_custom_model
from .options import SPLITS, TrainOptions

_DECODE = 1 << 16  # edges decoded at a time in evaluation


@dataclass
class EdgeSplit:
    """One split's edges of this rank: ends ``(2, E)`` (per-type node IDs), per-type edge IDs, their labels."""

    pairs: np.ndarray
    ids: np.ndarray
    labels: np.ndarray


@dataclass
class EdgeTask:
    """An edge task as one rank sees it: the edge type, the label kind, the output width, this rank's edges of
    each split."""

    etype: EType
    kind: str
    classes: int
    split: dict[str, EdgeSplit]


def edge_task(s: Session, g: DistGraph, opts: TrainOptions) -> EdgeTask:
    """This rank's labelled edges of each split, the label kind and the output width (every split edge's label
    checked, the same error on every rank). Collective."""
    assert opts.edge_type is not None  # resolved by contract.resolve_data
    et, label = g.canonical_etype(opts.edge_type), opts.label or "label"
    data = g.edges[et].data
    src, dst, eid = g.local_edge_ids(et)
    per = g.group.per_part(g.get_partition_book().num_partitions())
    t = s.rank % per  # this rank's cut of its partition's edges
    held = data[label]
    dtype = held[torch.zeros(0, dtype=torch.int64)].dtype  # a read of no rows: the stored dtype
    row_shape = tuple(held.shape[1:])
    kind = kind_of(not dtype.is_floating_point, row_shape, opts.label_kind, f"label {label!r} of {et}")
    split: dict[str, EdgeSplit] = {}
    for k, name in zip(SPLITS, opts.split_masks):
        at = np.flatnonzero(data[name][torch.from_numpy(eid)].numpy().astype(bool))
        at = at[at.shape[0] * t // per : at.shape[0] * (t + 1) // per]
        raw = held[torch.from_numpy(eid[at])].numpy()
        split[k] = EdgeSplit(np.stack([src[at], dst[at]]), eid[at], raw)
    classes = _check_labels(s, g, et, kind, split=split, declared=opts.num_classes, columns=width(row_shape))
    for part in split.values():
        part.labels = as_targets(kind, part.labels)
        if kind == "classification":
            part.labels = part.labels.reshape(-1)
    return EdgeTask(et, kind, classes, split)


def _check_labels(
    s: Session, g: DistGraph, et: EType, kind: str, *, split: dict[str, EdgeSplit], declared: int | None, columns: int
) -> int:
    """The output width (classes; or the label's ``columns``), every rank's split edges' labels checked: a class
    outside ``[0, declared)`` (or below 0), a multi-label entry other than 0 or 1, a regression target that is
    not finite. Errors name the first bad edge by its ends' original IDs."""
    labels = np.concatenate([p.labels.reshape(p.labels.shape[0], columns) for p in split.values()])
    pairs = np.concatenate([p.pairs for p in split.values()], axis=1)
    if kind != "classification":
        found = problem(kind, labels if columns > 1 else labels.reshape(-1))
        bad = None if found is None else (int(pairs[0, found.position]), int(pairs[1, found.position]), found.why)
        top = columns
    else:
        flat = labels.reshape(-1).astype(np.int64)
        top = int(flat.max()) + 1 if flat.size else 0
        out = np.flatnonzero((flat < 0) | (flat >= (declared if declared is not None else np.iinfo(np.int64).max)))
        bad = None if not out.size else (int(pairs[0, out[0]]), int(pairs[1, out[0]]), f"class {int(flat[out[0]])}")
    told = [json.loads(b) for b in all_gather_bytes(s.ctx, json.dumps([bad, top]).encode(), "edge label check")]
    problems = [tuple(b) for b, _ in told if b is not None]
    if problems:
        u, v, why = min(problems)
        book = g.get_partition_book()
        ends = (int(book.to_original(t, torch.tensor([n]))[0]) for t, n in ((et[0], u), (et[2], v)))
        allowed = f"outside the {declared} classes of --num-classes" if declared is not None else "below 0"
        raise InputError(
            f"edge ({', '.join(map(str, ends))}) of {':'.join(et)} (original node IDs) of a train/val/test split: "
            f"{why}{' is ' + allowed if kind == 'classification' else ''}"
        )
    return declared if declared is not None and kind == "classification" else max(1, max(t for _, t in told))


def edge_model(opts: TrainOptions, inputs: ModelInputs, et: EType, out_dim: int, *, edge_dim: int) -> EdgeModel:
    """The encoder (``opts.model``, ``opts.hidden`` outputs) and ``opts.edge_decoder`` to ``out_dim`` outputs
    (``edge_dim``: the labelled edge's feature columns the ``concat`` decoder reads, 0: none)."""
    encoder = build_model(opts, inputs, opts.hidden, [et[0], et[2]])
    try:
        decoder = edge_decoder(opts.edge_decoder, opts.hidden, edge_dim, opts.hidden, out_dim=out_dim)
    except ValueError as exc:
        raise InputError(f"--edge-decoder: {exc}") from None
    return EdgeModel(encoder, decoder, et[0], et[2])


class EdgeRows:
    """The labelled edges' own feature rows (``opts.edge_feat``, for the ``concat`` decoder), by edge ID."""

    def __init__(self, g: DistGraph, et: EType, opts: TrainOptions):
        name = opts.edge_feat if opts.edge_decoder == "concat" else None
        self.view = g.edges[et].data[name] if name is not None else None
        self.width = 0 if self.view is None else (int(self.view.shape[1]) if len(self.view.shape) > 1 else 1)

    def __call__(self, ids: np.ndarray) -> torch.Tensor | None:
        if self.view is None:
            return None
        return self.view[torch.from_numpy(ids)].float().view(ids.shape[0], self.width)


def edge_loader(
    g: DistGraph,
    opts: TrainOptions,
    inputs: ModelInputs,
    task: EdgeTask,
    *,
    attrs: EdgeRows,
    world: int,
    device: torch.device,
    device_cache: Any = None,
) -> DistLinkNeighborLoader:
    """The training batches of an edge task: its training edges with their ends' neighbourhoods, each batch's
    labels (``y_edge``) and the edges' own feature rows (``target_attr``) attached on the host."""
    et, part = task.etype, task.split["train"]

    def labels(batch: Any) -> None:
        store = batch[et] if inputs.hetero else batch
        at = store.input_id.numpy()
        store.y_edge = torch.from_numpy(part.labels[at])
        attr = attrs(part.ids[at])
        if attr is not None:
            store.target_attr = attr

    return DistLinkNeighborLoader(
        g,
        opts.fanouts,
        part.pairs,
        math.ceil(opts.batch_size / world),
        edge_type=et,
        **training_loader_options(opts, inputs, device=device, device_cache=device_cache),
        transform=labels,
    )


def decode_edges(
    part: EdgeSplit, tables: dict, task: EdgeTask, decoder: torch.nn.Module, *, attrs: EdgeRows, device: torch.device
) -> torch.Tensor:
    """The decoder's outputs (on the host) for the edges of ``part`` of ``task`` from their ends' rows in
    ``tables`` (every node's encoder outputs), ``_DECODE`` edges at a time."""
    et = task.etype
    pieces = []
    with torch.no_grad():
        for lo in range(0, part.ids.shape[0], _DECODE):
            pairs, ids = part.pairs[:, lo : lo + _DECODE], part.ids[lo : lo + _DECODE]
            hs, hd = (tables[t][torch.from_numpy(p)].to(device) for t, p in ((et[0], pairs[0]), (et[2], pairs[1])))
            attr = attrs(ids)
            pieces.append(decoder(hs, hd, None if attr is None else attr.to(device)).float().cpu())
    return torch.cat(pieces) if pieces else torch.zeros((0, task.classes))


def train_edge(s: Session, opts: TrainOptions, cfg: PartitionConfig | None = None) -> dict[str, Any]:
    """Train and evaluate; returns the metrics (the same on every rank)."""
    torch.manual_seed(opts.seed)
    g = open_graph(opts, cfg)
    task = edge_task(s, g, opts)
    et, train_part = task.etype, task.split["train"]
    if not opts.allow_nonfinite:
        check_finite_features(g, opts.feat or "feat")
    ends = {et[0]: train_part.pairs[0]} if et[0] != et[2] else {et[0]: train_part.pairs.reshape(-1)}
    seeds = ends | ({et[2]: train_part.pairs[1]} if et[0] != et[2] else {})
    cache = feature_cache(g, opts, seeds)
    on_device = device_cache(g, opts, seeds, rank_device(opts.device).device)
    inputs = ModelInputs(g, opts)
    attrs = EdgeRows(g, et, opts)
    model = edge_model(opts, inputs, et, task.classes, edge_dim=attrs.width)
    check_custom_model(
        g, opts, model.encoder, inputs, ntype=et[0], out_dim=opts.hidden, seeds=torch.from_numpy(train_part.pairs[0])
    )
    outputs = Outputs(s, g, model.encoder, inputs, opts=opts, types=[et[0], et[2]], name="edge-outputs")
    names = chosen_metrics(opts.metric, task.kind)
    loss_of = task_loss(s.ctx, opts, task.kind, train_part.labels, width=task.classes)

    def evaluate(k: str, prefix: str) -> dict[str, float | None]:
        part = task.split[k]
        model.eval()
        out = decode_edges(part, outputs.get(), task, model.decoder, attrs=attrs, device=inputs.device)
        found = exact_metrics(s.ctx, task.kind, names, out, targets=torch.from_numpy(part.labels), classes=task.classes)
        return {f"{prefix}{m}": v for m, v in found.items()}

    def loss(ddp: torch.nn.Module, batch: Any) -> torch.Tensor:
        outputs.changed()  # a training step follows: outputs computed before it are stale
        store = batch[et] if inputs.hetero else batch
        x, edge_index, hops, *edge_attr = inputs(batch)
        target = store.target_attr if "target_attr" in store else None
        out = ddp(x, edge_index, hops, store.edge_label_index, *edge_attr, target_attr=target)
        return loss_of(out, store.y_edge)

    trainer = Trainer(s, g, opts, model, inputs=inputs, metric=f"val_{names[0]}")
    loader = edge_loader(
        g, opts, inputs, task, attrs=attrs, world=s.world_size, device=trainer.device, device_cache=on_device
    )
    history = trainer.fit(loader, loss, lambda: evaluate("val", "val_"))
    metrics = {
        "task": "edge",
        "edge_type": list(et),
        "label_kind": task.kind,
        "epochs": history,
        "world_size": s.world_size,
        "num_parts": g.served.stored_book.num_partitions(),
    }
    metrics |= trainer.final_test(lambda: evaluate("test", ""), outputs.changed)
    metrics |= {f"{k}_metrics": {m: metrics.get(f"{k}_{m}") for m in names} for k in ("val", "test")}
    if opts.save_embeddings:  # of the selected epoch's encoder (the test evaluation computed the outputs)
        with timing.phase("embeddings_s"):
            save_tables(s, g, representations(g, model.encoder, inputs, opts, outputs=outputs), opts.save_embeddings)
    metrics["inference_s"] = outputs.seconds
    metrics.update(cache_summary(s, cache or on_device))
    return metrics

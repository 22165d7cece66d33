"""Several tasks on one shared encoder (``--task multi``; the tasks: :mod:`.multitask`), on one rank.

Each task keeps what it has alone — its own seeds (node labels, labelled edges, or training links with their
negatives), its loader, loss, head and metrics (:mod:`.node`, :mod:`.edge`, :mod:`.link`) — and they share the
encoder (``--model``, ``--hidden`` outputs; a node task's head is a linear map of them, an edge or link task's
its decoder). Training alternates the tasks (:class:`~.multi_model.MultiLoader`): a step is one batch of one
task, its loss times its weight; an epoch is every task's batches, each task's spread evenly over it, so every
task sees its data once an epoch as it would alone. Evaluation computes every node's encoder output once
(layer by layer), and each task its metrics from it; the main task's first metric selects the best epoch.
Metrics are named ``val_<task>/<metric>`` per epoch and given per task in ``val_metrics`` and
``test_metrics``."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..distributed.graph import DistGraph
from ..distributed.loader import DistLinkNeighborLoader, DistNeighborLoader
from ..distributed.runtime import Session
from ..models import LinkModel
from ..models.edge import edge_decoder
from . import timing
from .edge import EdgeRows, edge_task
from .embeddings import Outputs, representations, save_tables
from .inputs import ModelInputs, build_model
from .link import LinkEvaluator, edge_weights, link_decoder, my_edges
from .link_split import open_link_split, require_link_split
from .loop import Trainer, open_graph
from .losses import chosen_loss, class_weights, loss_function
from .metrics import chosen_metrics, exact_metrics
from .multi_model import MultiLoader, MultiTaskModel, NodeHead, PairHead, TaskBatch
from .multitask import TaskSpec, main_task, task_specs
from .negatives import LOADER_MODE, given_hard, link_loss, negative_pairs, per_positive
from .node import node_task
from .options import TrainOptions


@dataclass
class Shared:
    """What the tasks of a rank share: the session, graph, inputs and the encoder's outputs."""

    s: Session
    g: DistGraph
    inputs: ModelInputs
    outputs: Outputs | None = None


def _encoder_inputs(inputs: ModelInputs, batch: Any) -> tuple:
    x, edge_index, hops, *edge_attr = inputs(batch)
    return x, edge_index, hops, (edge_attr[0] if edge_attr else None)


class NodeRunner:
    """A node task: its labelled nodes, loss, head and metrics."""

    def __init__(self, sh: Shared, t: TaskSpec):
        self.sh, self.t, o = sh, t, t.opts
        self.task = node_task(sh.s, sh.g, o)
        self.types = [self.task.target]
        self.head = NodeHead(o.hidden, self.task.classes, self.task.target)
        self.names = chosen_metrics(o.metric, self.task.kind)
        train = self.task.labels_of(self.task.split["train"].numpy())
        weights = class_weights(sh.s.ctx, o.class_weights, self.task.kind, train, self.task.classes)
        self.loss_of = loss_function(self.task.kind, chosen_loss(o.loss, self.task.kind), weights, o.focal_gamma)

    def selects(self) -> str:
        return self.names[0]

    def loader(self, device: torch.device) -> Any:
        o, g, target = self.t.opts, self.sh.g, self.task.target
        hetero = self.sh.inputs.hetero

        def labels(batch: Any) -> None:
            store = batch[target] if hetero else batch
            store.y_seed = torch.from_numpy(self.task.labels_of(store.n_id[: store.batch_size].numpy()))

        return DistNeighborLoader(
            g,
            o.fanouts,
            self.task.split["train"],
            math.ceil(o.batch_size / self.sh.s.world_size),
            input_type=target if len(g.ntypes) > 1 else None,
            shuffle=True,
            num_workers=o.num_workers,
            seed=o.seed,
            label_name=None,
            wire_dtype=o.wire_dtype,
            **self.sh.inputs.loader_options(),
            device=device,
            copy=o.rehearse,
            transform=labels,
        )

    def step(self, batch: Any) -> tuple:
        store = batch[self.task.target] if self.sh.inputs.hetero else batch
        return self.t.name, _encoder_inputs(self.sh.inputs, batch), (store.batch_size,)

    def loss(self, out: torch.Tensor, batch: Any) -> torch.Tensor:
        store = batch[self.task.target] if self.sh.inputs.hetero else batch
        return self.loss_of(out, store.y_seed)

    def evaluate(self, key: str) -> dict[str, float | None]:
        assert self.sh.outputs is not None
        ids = self.task.split[key]
        with torch.no_grad():
            out = self.head.linear(self.sh.outputs.get()[self.task.target][ids].to(self.sh.inputs.device)).cpu()
        targets = torch.from_numpy(self.task.labels_of(ids.numpy()))
        return exact_metrics(self.sh.s.ctx, self.task.kind, self.names, out, targets, classes=self.task.classes)


class EdgeRunner:
    """An edge task: its labelled edges, loss, decoder and metrics."""

    def __init__(self, sh: Shared, t: TaskSpec):
        self.sh, self.t, o = sh, t, t.opts
        self.task = edge_task(sh.s, sh.g, o)
        et = self.et = self.task.etype
        self.types = [et[0], et[2]]
        self.attrs = EdgeRows(sh.g, et, o)
        decoder = edge_decoder(o.edge_decoder, o.hidden, self.attrs.width, o.hidden, self.task.classes)
        self.head = PairHead(decoder, et[0], et[2], reads_attr=True)
        self.names = chosen_metrics(o.metric, self.task.kind)
        train = self.task.split["train"].labels
        weights = class_weights(sh.s.ctx, o.class_weights, self.task.kind, train, self.task.classes)
        self.loss_of = loss_function(self.task.kind, chosen_loss(o.loss, self.task.kind), weights, o.focal_gamma)

    def selects(self) -> str:
        return self.names[0]

    def loader(self, device: torch.device) -> Any:
        o, part, hetero = self.t.opts, self.task.split["train"], self.sh.inputs.hetero

        def labels(batch: Any) -> None:
            store = batch[self.et] if hetero else batch
            at = store.input_id.numpy()
            store.y_edge = torch.from_numpy(part.labels[at])
            attr = self.attrs(part.ids[at])
            if attr is not None:
                store.target_attr = attr

        return DistLinkNeighborLoader(
            self.sh.g,
            o.fanouts,
            part.pairs,
            math.ceil(o.batch_size / self.sh.s.world_size),
            edge_type=self.et,
            shuffle=True,
            num_workers=o.num_workers,
            seed=o.seed,
            wire_dtype=o.wire_dtype,
            **self.sh.inputs.loader_options(),
            device=device,
            copy=o.rehearse,
            transform=labels,
        )

    def step(self, batch: Any) -> tuple:
        store = batch[self.et] if self.sh.inputs.hetero else batch
        attr = store.target_attr if "target_attr" in store else None
        return self.t.name, _encoder_inputs(self.sh.inputs, batch), (store.edge_label_index, attr)

    def loss(self, out: torch.Tensor, batch: Any) -> torch.Tensor:
        return self.loss_of(out, (batch[self.et] if self.sh.inputs.hetero else batch).y_edge)

    def evaluate(self, key: str) -> dict[str, float | None]:
        assert self.sh.outputs is not None
        part, tables, dev = self.task.split[key], self.sh.outputs.get(), self.sh.inputs.device
        with torch.no_grad():
            hs, hd = (
                tables[t][torch.from_numpy(p)].to(dev)
                for t, p in ((self.et[0], part.pairs[0]), (self.et[2], part.pairs[1]))
            )
            attr = self.attrs(part.ids)
            out = self.head.decoder(hs, hd, None if attr is None else attr.to(dev)).float().cpu()
        labels = torch.from_numpy(part.labels)
        return exact_metrics(self.sh.s.ctx, self.task.kind, self.names, out, labels, classes=self.task.classes)


class LinkRunner:
    """A link prediction task: this rank's training links, their negatives, the decoder and the ranking."""

    def __init__(self, sh: Shared, t: TaskSpec):
        self.sh, self.t, o = sh, t, t.opts
        # training reads the held-out edges; a restored checkpoint (embed) has none, and its recorded edge type
        self.held = open_link_split(require_link_split(o)) if o.link_split or o.edge_type is None else None
        et = self.et = sh.g._etype(self.held.etype if self.held is not None else o.edge_type)
        self.types = [et[0], et[2]]
        self.mine, ids = my_edges(sh.s, sh.g, et)
        self.weights = edge_weights(sh.g, et, o.edge_weight, ids, self.mine)
        self.hard = given_hard(sh.s, sh.g, et, o.hard_negatives, ids, self.mine) if o.hard_negatives else None
        self.head = PairHead(link_decoder(o), et[0], et[2], reads_attr=False)
        self.k = per_positive(o.neg_ratio)
        self.evaluator: LinkEvaluator | None = None

    def selects(self) -> str:
        return "mrr_filtered" if self.t.opts.filtered else "mrr"

    def evaluating(self, encoder: torch.nn.Module) -> None:
        """Build the evaluator (collective: it reads the held-out edges) on the shared outputs."""
        assert self.held is not None
        view = LinkModel(encoder, self.head.decoder, self.et[0], self.et[2])
        self.evaluator = LinkEvaluator(
            self.sh.s, self.sh.g, view, self.sh.inputs, self.et, self.t.opts, self.held, self.sh.outputs
        )

    def loader(self, device: torch.device) -> Any:
        o, hetero = self.t.opts, self.sh.inputs.hetero

        def attach(batch: Any) -> None:
            if self.weights is not None:
                store = batch[self.et] if hetero else batch
                store.pos_weight = torch.from_numpy(self.weights[store.input_id.numpy()])

        return DistLinkNeighborLoader(
            self.sh.g,
            o.fanouts,
            self.mine,
            math.ceil(o.batch_size / self.sh.s.world_size),
            edge_type=self.et,
            neg_sampling=LOADER_MODE[o.negatives],
            neg_amount=o.neg_ratio,
            shuffle=True,
            num_workers=o.num_workers,
            seed=o.seed,
            exclude_seed_edges=True,
            wire_dtype=o.wire_dtype,
            **self.sh.inputs.loader_options(),
            device=device,
            copy=o.rehearse,
            transform=attach,
            hard_negatives=self.hard,
        )

    def step(self, batch: Any) -> tuple:
        store = batch[self.et] if self.sh.inputs.hetero else batch
        pairs = store.edge_label_index
        if self.t.opts.negatives != "uniform":
            pos = pairs[:, : store.input_id.shape[0]]
            neg = negative_pairs(
                self.t.opts.negatives, pos, self.k, store.dst_neg_index if "dst_neg_index" in store else None
            )
            pairs = torch.cat([pos, neg], 1)
        return self.t.name, _encoder_inputs(self.sh.inputs, batch), (pairs,)

    def loss(self, out: torch.Tensor, batch: Any) -> torch.Tensor:
        store = batch[self.et] if self.sh.inputs.hetero else batch
        w = store.pos_weight if "pos_weight" in store else None
        label = store.edge_label if self.t.opts.negatives == "uniform" else None
        return link_loss(out, store.input_id.shape[0], w, label)

    def evaluate(self, key: str) -> dict[str, float | None]:
        assert self.evaluator is not None
        return dict(self.evaluator(key, 1 if key == "val" else 2))


Runner = NodeRunner | EdgeRunner | LinkRunner


def build_multi(
    s: Session, g: DistGraph, inputs: ModelInputs, opts: TrainOptions
) -> tuple[MultiTaskModel, list[Runner]]:
    """Every task's data and head, and the model with the shared encoder (collective)."""
    sh = Shared(s, g, inputs)
    make: dict[str, Callable[[Shared, TaskSpec], Runner]] = {"node": NodeRunner, "edge": EdgeRunner, "link": LinkRunner}
    runners = [make[t.opts.task](sh, t) for t in task_specs(opts)]
    types = list(dict.fromkeys(t for r in runners for t in r.types))
    encoder = build_model(opts, inputs, opts.hidden, types)
    model = MultiTaskModel(encoder, {r.t.name: r.head for r in runners})
    sh.outputs = Outputs(s, g, encoder, inputs, opts, types, "multi-outputs")
    return model, runners


def train_multi(s: Session, opts: TrainOptions) -> dict[str, Any]:
    """Train and evaluate; returns the metrics (the same on every rank)."""
    torch.manual_seed(opts.seed)
    g = open_graph(opts)
    inputs = ModelInputs(g, opts)
    model, runners = build_multi(s, g, inputs, opts)
    outputs = runners[0].sh.outputs
    assert outputs is not None
    for r in runners:
        if isinstance(r, LinkRunner):
            r.evaluating(model.encoder)
    main = main_task(opts, task_specs(opts))
    chosen = next(r for r in runners if r.t.name == main.name)
    trainer = Trainer(s, g, opts, model, inputs, metric=f"val_{main.name}/{chosen.selects()}")
    loader = MultiLoader([r.loader(trainer.device) for r in runners])

    heads = {r.t.name: list(r.head.parameters()) for r in runners}
    stepping: list[str] = []

    def loss(ddp: torch.nn.Module, step: TaskBatch) -> torch.Tensor:
        outputs.changed()  # a training step follows: outputs computed before it are stale
        r, batch = runners[step.task], step.batch
        stepping[:] = [r.t.name]
        return r.t.weight * r.loss(ddp(*r.step(batch)), batch)

    def idle_heads() -> None:
        """After the backward pass: the other tasks' heads have no gradient (DDP gives them zeros), so that
        Adam leaves them be rather than move them on their momentum."""
        for name, params in heads.items():
            if name not in stepping:
                for p in params:
                    p.grad = None

    trainer.after_backward = idle_heads

    def evaluate(key: str, prefix: str) -> dict[str, float | None]:
        return {f"{prefix}{r.t.name}/{m}": v for r in runners for m, v in r.evaluate(key).items()}

    history = trainer.fit(loader, loss, lambda: evaluate("val", "val_"))
    metrics: dict[str, Any] = {
        "task": "multi",
        "tasks": [r.t.name for r in runners],
        "main_task": main.name,
        "epochs": history,
        "world_size": s.world_size,
        "num_parts": g.served.stored_book.num_partitions(),
    }
    metrics |= trainer.final_test(lambda: evaluate("test", ""), outputs.changed)
    for k in ("val", "test"):
        metrics[f"{k}_metrics"] = {
            r.t.name: {key.split("/", 1)[1]: v for key, v in metrics.items() if key.startswith(f"{k}_{r.t.name}/")}
            for r in runners
        }
    if opts.save_embeddings:  # the encoder's outputs at the selected epoch
        with timing.phase("embeddings_s"):
            save_tables(s, g, representations(g, model.encoder, inputs, opts, outputs), opts.save_embeddings)
    for r in runners:
        if isinstance(r, LinkRunner) and r.evaluator is not None:
            r.evaluator.close()
    metrics["inference_s"] = outputs.seconds
    return metrics

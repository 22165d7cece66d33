"""Several tasks on one shared encoder (``--task multi``; the tasks: :mod:`.multitask`), on one rank.

Each task keeps what it has alone — its own seeds (node labels, labelled edges, or training links with their
negatives), its loader, loss, head and metrics (:mod:`.node`, :mod:`.edge`, :mod:`.link`) — and they share the
encoder (``--model``, ``--hidden`` outputs; a node task's head is a linear map of them, an edge or link task's
its decoder). A training step (``--task-schedule``, :class:`~.multi_model.MultiLoader`) takes a batch of every
task and sums their losses times their weights (``sum``: an epoch is the longest task's batches, the others
start again as they run out), or one task's batch (``alternate``: an epoch is every task's batches once).
Evaluation computes every node's encoder output once (layer by layer), and each task its metrics from it; the
main task's first metric selects the best epoch.
Metrics are named ``val_<task>/<metric>`` per epoch and given per task in ``val_metrics`` and
``test_metrics``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..distributed.runtime.graph import DistGraph
from ..distributed.runtime.session import Session
from ..format.config import PartitionConfig
from ..models import LinkModel
from ..models.edge import edge_decoder
from . import timing
from .edge import EdgeRows, decode_edges, edge_loader, edge_task
from .embeddings import Outputs, representations, save_tables
from .inputs import ModelInputs, build_model
from .link import LinkEvaluator, edge_weights, link_decoder, link_loader, my_edges
from .link_split import open_link_split, require_link_split
from .loop import Trainer, open_graph
from .losses import task_loss
from .metrics import chosen_metrics, exact_metrics
from .multi_model import MultiLoader, MultiTaskModel, NodeHead, PairHead, Step
from .multitask import TaskSpec, main_task, task_specs
from .negatives import batch_loss, given_hard, per_positive, scored_pairs
from .node import node_loader, node_task
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
        self.loss_of = task_loss(sh.s.ctx, o, self.task.kind, train, width=self.task.classes)

    def selects(self) -> str:
        return self.names[0]

    def loader(self, device: torch.device) -> Any:
        sh = self.sh
        return node_loader(sh.g, self.t.opts, sh.inputs, self.task, world=sh.s.world_size, device=device)

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
        return exact_metrics(self.sh.s.ctx, self.task.kind, self.names, out, targets=targets, classes=self.task.classes)


class EdgeRunner:
    """An edge task: its labelled edges, loss, decoder and metrics."""

    def __init__(self, sh: Shared, t: TaskSpec):
        self.sh, self.t, o = sh, t, t.opts
        self.task = edge_task(sh.s, sh.g, o)
        et = self.et = self.task.etype
        self.types = [et[0], et[2]]
        self.attrs = EdgeRows(sh.g, et, o)
        decoder = edge_decoder(o.edge_decoder, o.hidden, self.attrs.width, o.hidden, out_dim=self.task.classes)
        self.head = PairHead(decoder, et[0], et[2], reads_attr=True)
        self.names = chosen_metrics(o.metric, self.task.kind)
        self.loss_of = task_loss(sh.s.ctx, o, self.task.kind, self.task.split["train"].labels, width=self.task.classes)

    def selects(self) -> str:
        return self.names[0]

    def loader(self, device: torch.device) -> Any:
        sh = self.sh
        return edge_loader(
            sh.g, self.t.opts, sh.inputs, self.task, attrs=self.attrs, world=sh.s.world_size, device=device
        )

    def step(self, batch: Any) -> tuple:
        store = batch[self.et] if self.sh.inputs.hetero else batch
        attr = store.target_attr if "target_attr" in store else None
        return self.t.name, _encoder_inputs(self.sh.inputs, batch), (store.edge_label_index, attr)

    def loss(self, out: torch.Tensor, batch: Any) -> torch.Tensor:
        return self.loss_of(out, (batch[self.et] if self.sh.inputs.hetero else batch).y_edge)

    def evaluate(self, key: str) -> dict[str, float | None]:
        assert self.sh.outputs is not None
        part = self.task.split[key]
        out = decode_edges(
            part, self.sh.outputs.get(), self.task, self.head.decoder, attrs=self.attrs, device=self.sh.inputs.device
        )
        labels = torch.from_numpy(part.labels)
        return exact_metrics(self.sh.s.ctx, self.task.kind, self.names, out, targets=labels, classes=self.task.classes)


class LinkRunner:
    """A link prediction task: this rank's training links, their negatives, the decoder and the ranking."""

    def __init__(self, sh: Shared, t: TaskSpec):
        self.sh, self.t, o = sh, t, t.opts
        # training reads the held-out edges; a restored checkpoint (embed) has none, and its recorded edge type
        self.held = open_link_split(require_link_split(o)) if o.link_split or o.edge_type is None else None
        et = self.et = sh.g.canonical_etype(self.held.etype if self.held is not None else o.edge_type)
        self.types = [et[0], et[2]]
        self.mine, ids = my_edges(sh.s, sh.g, et)
        self.weights = edge_weights(sh.g, et, o.edge_weight, ids, pairs=self.mine)
        self.hard = given_hard(sh.s, sh.g, et, o.hard_negatives, ids=ids, pairs=self.mine) if o.hard_negatives else None
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
            self.sh.s,
            self.sh.g,
            view,
            self.sh.inputs,
            et=self.et,
            opts=self.t.opts,
            held=self.held,
            outputs=self.sh.outputs,
        )

    def loader(self, device: torch.device) -> Any:
        sh = self.sh
        return link_loader(
            sh.g,
            self.t.opts,
            sh.inputs,
            self.et,
            mine=self.mine,
            world=sh.s.world_size,
            weights=self.weights,
            hard=self.hard,
            device=device,
        )

    def step(self, batch: Any) -> tuple:
        store = batch[self.et] if self.sh.inputs.hetero else batch
        pairs = scored_pairs(store, self.t.opts.negatives, self.k)
        return self.t.name, _encoder_inputs(self.sh.inputs, batch), (pairs,)

    def loss(self, out: torch.Tensor, batch: Any) -> torch.Tensor:
        return batch_loss(out, batch[self.et] if self.sh.inputs.hetero else batch, self.t.opts.negatives)

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
    model = MultiTaskModel(encoder, {r.t.name: r.head for r in runners}, find_unused=opts.task_schedule != "sum")
    sh.outputs = Outputs(s, g, encoder, inputs, opts=opts, types=types, name="multi-outputs")
    return model, runners


def train_multi(s: Session, opts: TrainOptions, cfg: PartitionConfig | None = None) -> dict[str, Any]:
    """Train and evaluate; returns the metrics (the same on every rank)."""
    torch.manual_seed(opts.seed)
    g = open_graph(opts, cfg)
    inputs = ModelInputs(g, opts)
    model, runners = build_multi(s, g, inputs, opts)
    outputs = runners[0].sh.outputs
    assert outputs is not None
    for r in runners:
        if isinstance(r, LinkRunner):
            r.evaluating(model.encoder)
    main = main_task(opts, task_specs(opts))
    chosen = next(r for r in runners if r.t.name == main.name)
    trainer = Trainer(s, g, opts, model, inputs=inputs, metric=f"val_{main.name}/{chosen.selects()}")
    loader = MultiLoader([r.loader(trainer.device) for r in runners], opts.task_schedule)

    heads = {r.t.name: list(r.head.parameters()) for r in runners}
    stepping: list[str] = []

    def loss(ddp: torch.nn.Module, step: Step) -> torch.Tensor:
        outputs.changed()  # a training step follows: outputs computed before it are stale
        parts = [(runners[p.task], p.batch) for p in step.parts]
        stepping[:] = [r.t.name for r, _ in parts]
        outs = ddp([r.step(batch) for r, batch in parts])  # one forward pass: DDP reduces once a step
        losses = [r.t.weight * r.loss(out, batch) for (r, batch), out in zip(parts, outs, strict=True)]
        return torch.stack(losses).sum()

    def idle_heads() -> None:
        """After the backward pass: the heads of tasks the step did not train have no gradient (DDP gives them
        zeros), so that Adam leaves them be rather than move them on their momentum."""
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
            save_tables(s, g, representations(g, model.encoder, inputs, opts, outputs=outputs), opts.save_embeddings)
    for r in runners:
        if isinstance(r, LinkRunner) and r.evaluator is not None:
            r.evaluator.close()
    metrics["inference_s"] = outputs.seconds
    return metrics

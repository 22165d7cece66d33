"""The model of a multi-task run: one shared encoder and a head per task, in one module (so DDP sums the
gradients of all of them), and the loader that gives each step its tasks' batches."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from .inputs import rows_of


class NodeHead(nn.Module):
    """A node task's outputs: a linear map of the encoder's rows of its ``target`` type's seeds."""

    def __init__(self, hidden: int, out_dim: int, target: str):
        super().__init__()
        self.linear, self.target = nn.Linear(hidden, out_dim), target

    def forward(self, h: Any, batch_size: int) -> torch.Tensor:
        return self.linear(rows_of(h, self.target)[:batch_size])


class PairHead(nn.Module):
    """An edge or link task's outputs: its decoder on the rows of pairs' ends (``attr``: the labelled edges' own
    features, which only an edge task's decoder reads)."""

    def __init__(self, decoder: nn.Module, src_type: str, dst_type: str, reads_attr: bool):
        super().__init__()
        self.decoder, self.src_type, self.dst_type, self.reads_attr = decoder, src_type, dst_type, reads_attr

    def forward(self, h: Any, pairs: torch.Tensor, attr: torch.Tensor | None = None) -> torch.Tensor:
        hs, hd = (h[self.src_type], h[self.dst_type]) if isinstance(h, dict) else (h, h)
        a, b = hs[pairs[0]], hd[pairs[1]]
        return self.decoder(a, b, attr) if self.reads_attr else self.decoder(a, b)


class MultiTaskModel(nn.Module):
    """The shared ``encoder`` and the ``heads`` by task name. :meth:`forward` takes a step's tasks, each its name,
    the encoder's inputs ``(x, edge_index, hops, edge_attr or None)`` and its head's arguments, and returns each
    head's outputs: one forward pass a step, so that DDP sums every task's gradients at once. When a step trains
    one task (``alternate``), the other heads take no part: ``find_unused`` tells DDP to look for them."""

    def __init__(self, encoder: nn.Module, heads: dict[str, nn.Module], find_unused: bool):
        super().__init__()
        self.encoder, self.heads, self.find_unused = encoder, nn.ModuleDict(heads), find_unused

    def forward(self, tasks: list[tuple[str, tuple, tuple]]) -> list[torch.Tensor]:
        return [self._one(name, encoder_inputs, extra) for name, encoder_inputs, extra in tasks]

    def _one(self, name: str, encoder_inputs: tuple, extra: tuple) -> torch.Tensor:
        x, edge_index, hops, edge_attr = encoder_inputs
        h = self.encoder(x, edge_index, hops) if edge_attr is None else self.encoder(x, edge_index, hops, edge_attr)
        return self.heads[name](h, *extra)


class TaskBatch:
    """A step's batch of one task and the task's index."""

    def __init__(self, task: int, batch: Any):
        self.task, self.batch = task, batch


class Step:
    """A step's batches, one per task it trains; the batches' timings and counts are read through it, summed."""

    def __init__(self, parts: list[TaskBatch]):
        self.parts = parts

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return sum(getattr(p.batch, name, 0) for p in self.parts)


class MultiLoader:
    """The tasks' loaders as one, yielding :class:`Step` s in the same order on every rank.

    ``sum``: a step takes the next batch of every task; an epoch is as many steps as the task of most batches
    has, and a task of fewer starts its seeds again when they run out (each pass shuffled anew), as GraphStorm
    does. ``alternate``: a step is one task's batch; an epoch is every task's batches once, each task's spread
    evenly over it (its ``k``-th of ``n`` at ``(k + 0.5) / n`` of the way)."""

    def __init__(self, loaders: list[Any], schedule: str = "sum"):
        self.loaders, self.summed, self.epoch = loaders, schedule == "sum", 0
        self.feeder, self.device_cache = None, None
        if self.summed:
            steps = max((len(ld) for ld in loaders), default=0)
            for ld in loaders:
                if 0 < len(ld) < steps:  # a task without batches takes no part
                    ld.steps = steps

    def schedule(self) -> list[int]:
        """``alternate``: the task of each step of an epoch."""
        at = [((k + 0.5) / len(ld), i) for i, ld in enumerate(self.loaders) for k in range(len(ld))]
        return [i for _, i in sorted(at)]

    def __len__(self) -> int:
        sizes = [len(ld) for ld in self.loaders]
        return max(sizes, default=0) if self.summed else sum(sizes)

    @property
    def background(self) -> bool:
        return any(getattr(ld, "background", False) for ld in self.loaders)

    def __iter__(self) -> Iterator[Step]:
        self.epoch += 1
        its = []
        for ld in self.loaders:
            ld.epoch = self.epoch - 1  # each loader's own epoch numbering, as alone
            its.append(iter(ld))
        if self.summed:
            live = [i for i, ld in enumerate(self.loaders) if len(ld)]
            for _ in range(len(self)):
                yield Step([TaskBatch(i, next(its[i])) for i in live])
        else:
            for i in self.schedule():
                yield Step([TaskBatch(i, next(its[i]))])

    def __enter__(self) -> MultiLoader:
        for ld in self.loaders:
            ld.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        for ld in self.loaders:
            ld.__exit__(*exc)

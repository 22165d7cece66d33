"""The model of a multi-task run: one shared encoder and a head per task, in one module (so DDP sums the
gradients of all of them), and the loader that alternates the tasks' batches."""

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
    """The shared ``encoder`` and the ``heads`` by task name. :meth:`forward` takes a task's name, the encoder's
    inputs ``(x, edge_index, hops, edge_attr or None)`` and its head's arguments, and returns the head's outputs.
    A step trains one task: the other heads take no part (DDP is told to look for unused parameters)."""

    find_unused = True

    def __init__(self, encoder: nn.Module, heads: dict[str, nn.Module]):
        super().__init__()
        self.encoder, self.heads = encoder, nn.ModuleDict(heads)

    def forward(self, name: str, encoder_inputs: tuple, extra: tuple) -> torch.Tensor:
        x, edge_index, hops, edge_attr = encoder_inputs
        h = self.encoder(x, edge_index, hops) if edge_attr is None else self.encoder(x, edge_index, hops, edge_attr)
        return self.heads[name](h, *extra)


class TaskBatch:
    """A step's batch and its task's index; the batch's timings and counts are read through it."""

    def __init__(self, task: int, batch: Any):
        self.task, self.batch = task, batch

    def __getattr__(self, name: str) -> Any:
        return getattr(self.batch, name)


class MultiLoader:
    """The tasks' loaders as one, alternating: an epoch is every task's batches, one task a step, each task's
    steps spread evenly over the epoch (its ``k``-th of ``n`` batches at ``(k + 0.5) / n`` of the way), in the
    same order on every rank. Every task sees its data once an epoch, as it would alone: a task of few batches
    is not repeated to keep pace with a long one (repeating overfits it). Yields :class:`TaskBatch`."""

    def __init__(self, loaders: list[Any]):
        self.loaders, self.epoch = loaders, 0
        self.feeder, self.device_cache = None, None

    def schedule(self) -> list[int]:
        """The task of each step of an epoch."""
        at = [((k + 0.5) / len(ld), i) for i, ld in enumerate(self.loaders) for k in range(len(ld))]
        return [i for _, i in sorted(at)]

    def __len__(self) -> int:
        return sum(len(ld) for ld in self.loaders)

    @property
    def background(self) -> bool:
        return any(getattr(ld, "background", False) for ld in self.loaders)

    def __iter__(self) -> Iterator[TaskBatch]:
        self.epoch += 1
        its = []
        for ld in self.loaders:
            ld.epoch = self.epoch - 1  # each loader's own epoch numbering, as alone
            its.append(iter(ld))
        for i in self.schedule():
            yield TaskBatch(i, next(its[i]))

    def __enter__(self) -> MultiLoader:
        for ld in self.loaders:
            ld.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        for ld in self.loaders:
            ld.__exit__(*exc)

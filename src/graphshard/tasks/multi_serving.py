"""A restored multi-task model served as the model of one of its tasks (``graphshard serve --head``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from ..models import LinkModel
from ..models.edge import EdgeModel
from .inputs import rows_of
from .multi import EdgeRunner, NodeRunner
from .multi_model import NodeHead
from .multitask import main_task, task_specs
from .options import TrainOptions
from .restore import Restored


class HeadedEncoder(torch.nn.Module):
    """The shared encoder followed by a node task's head: the task's outputs for its target type's nodes (what
    a single-task node model gives), for serving that head."""

    def __init__(self, encoder: torch.nn.Module, head: NodeHead):
        super().__init__()
        self.encoder, self.head = encoder, head

    def forward(self, *args: Any) -> Any:
        h = self.encoder(*args)
        out = self.head.linear(rows_of(h, self.head.target))
        return {self.head.target: out} if isinstance(h, dict) else out


def head_view(restored: Restored, opts: TrainOptions, name: str | None) -> Restored:
    """A restored multi-task model as the model of its task ``name`` alone (default: the main task), for
    ``graphshard serve``."""
    main = name or main_task(opts, task_specs(opts)).name
    r = next(r for r in restored.tasks if r.t.name == main)
    enc = restored.encoder
    if isinstance(r, NodeRunner):
        headed = HeadedEncoder(enc, r.head)
        return replace(
            restored,
            model=headed,
            encoder=headed,
            types=[r.task.target],
            tasks=[],
            classes=r.task.classes,
            label_kind=r.task.kind,
            task="node",
        )
    et, types = r.et, list(dict.fromkeys([r.et[0], r.et[2]]))
    if isinstance(r, EdgeRunner):
        view = EdgeModel(enc, r.head.decoder, et[0], et[2])
        return replace(
            restored,
            model=view,
            types=types,
            edge_type=et,
            tasks=[],
            classes=r.task.classes,
            label_kind=r.task.kind,
            task="edge",
        )
    link = LinkModel(enc, r.head.decoder, et[0], et[2])
    return replace(restored, model=link, types=types, edge_type=et, tasks=[], task="link")

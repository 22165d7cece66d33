"""Several tasks in one run (``--task multi``): the config file's ``tasks:`` list, each task's options.

Each entry is a mapping: ``name`` (its key in the metrics), ``task`` (``node``, ``edge`` or ``link``),
``weight`` (its loss's weight, default 1) and the options of that task (:data:`OWN_OPTIONS`: ``batch_size``,
``target``, ``edge_type``, ``label``, ``metric``, ``loss``, ...), which override the run's. Everything else (the
encoder, fanouts, epochs, ...) is the run's, shared by all tasks. ``main_task`` names the task whose first metric
selects the best epoch."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from ..errors import InputError
from .fields import coerce, specs

TASK_KINDS = ("node", "edge", "link")
OWN_OPTIONS = (
    "batch_size",
    "target",
    "edge_type",
    "label",
    "label_kind",
    "metric",
    "loss",
    "focal_gamma",
    "class_weights",
    "split_masks",
    "num_classes",
    "edge_decoder",
    "edge_feat",
    "decoder",
    "negatives",
    "neg_ratio",
    "edge_weight",
    "hard_negatives",
    "link_split",
    "filtered",
)
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")


@dataclass(frozen=True)
class TaskSpec:
    """One task of a multi-task run: its name, loss weight, and the run's options with its own (``task`` set)."""

    name: str
    weight: float
    opts: Any  # TrainOptions


def task_specs(opts: Any) -> list[TaskSpec]:
    """The tasks of ``opts`` (``--task multi``), each checked as a run of its own; :class:`InputError` names the
    entry (``tasks[i]``) and the key at fault."""
    out: list[TaskSpec] = []
    known = specs(opts)
    for i, raw in enumerate(opts.tasks or []):
        where = f"tasks[{i}]"
        unknown = sorted(set(raw) - {"name", "task", "weight", *OWN_OPTIONS})
        if unknown:
            raise InputError(
                f"{where}: unknown key {unknown[0]!r} (keys: name, task, weight, {', '.join(OWN_OPTIONS)})"
            )
        name = raw.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise InputError(
                f"{where}: 'name' must be a name of letters, digits, _ and - (a letter first), got {name!r}"
            )
        if raw.get("task") not in TASK_KINDS:
            raise InputError(
                f"{where} ({name}): 'task' must be one of {', '.join(TASK_KINDS)}, got {raw.get('task')!r}"
            )
        weight = raw.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < float("inf"):
            raise InputError(f"{where} ({name}): 'weight' must be a number > 0, got {weight!r}")
        own: dict[str, Any] = {}
        for key in OWN_OPTIONS:
            if key in raw:
                try:
                    own[key] = coerce(known[key], raw[key])
                except ValueError as exc:
                    raise InputError(f"{where} ({name}): key {key!r}: {exc}") from None
        task_opts = replace(opts, task=raw["task"], tasks=None, main_task=None, **own)
        try:
            task_opts.check()
        except InputError as exc:
            raise InputError(f"{where} ({name}): {exc}") from None
        out.append(TaskSpec(name, float(weight), task_opts))
    names = [t.name for t in out]
    if len(set(names)) != len(names):
        raise InputError(f"tasks: names must differ, got {names}")
    if sum(t.opts.task == "link" for t in out) > 1:
        raise InputError("tasks: one link prediction task a run (its held-out edges leave the graph)")
    if opts.main_task is not None and opts.main_task not in names:
        raise InputError(f"main_task {opts.main_task!r} is not among the tasks ({', '.join(names)})")
    return out


def main_task(opts: Any, tasks: list[TaskSpec]) -> TaskSpec:
    """The task that selects the best epoch."""
    return next(t for t in tasks if t.name == (opts.main_task or tasks[0].name))


def with_tasks(opts: Any, tasks: list[TaskSpec]) -> Any:
    """``opts`` whose ``tasks`` hold each task's options as ``tasks`` now have them (resolved names)."""
    entries = []
    for t in tasks:
        entry: dict[str, Any] = {"name": t.name, "task": t.opts.task, "weight": t.weight}
        entry |= {k: getattr(t.opts, k) for k in OWN_OPTIONS if getattr(t.opts, k) != getattr(opts, k)}
        entries.append(entry)
    return replace(opts, tasks=entries)


def link_part(opts: Any) -> tuple[bool, str | None]:
    """Whether a run's partitioning holds edges out for link prediction, and of which edge type."""
    if opts.task != "multi":
        return opts.task == "link", opts.edge_type
    link = next((t for t in opts.tasks or [] if t.get("task") == "link"), None)
    return link is not None, (link.get("edge_type") if link is not None else None)

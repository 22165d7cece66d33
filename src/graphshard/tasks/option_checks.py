"""The checks of :class:`~.options.TrainOptions` that read several options together (each option's own type
and range are its field's: :mod:`.fields`)."""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from ..models.registry import check_name
from .metrics import METRICS

NODE_AND_EDGE = ("label_kind", "metric", "class_weights")  # options of the tasks that learn labels
LINK_ONLY = ("edge_weight", "hard_negatives")


def check_together(o: Any) -> None:
    """Raise :class:`InputError` naming options ``o`` (TrainOptions) that do not fit together."""
    check_name(o.model)
    if len(o.split_masks) != 3:
        raise InputError(f"split_masks needs 3 names (train, validation, test), got {o.split_masks}")
    if o.eval_fanouts is not None and len(o.eval_fanouts) != o.num_layers:
        raise InputError(f"{len(o.eval_fanouts)} evaluation fanouts for {o.num_layers} layers (fanouts {o.fanouts})")
    _check_caches(o)
    if o.embedding_layer == "hidden" and o.num_layers < 2:
        raise InputError("embedding_layer 'hidden' needs at least 2 layers (one fanout per layer)")
    known = {m for names in METRICS.values() for m in names}
    unknown = [m for m in o.metric or [] if m not in known]
    if unknown:
        raise InputError(f"metric {unknown[0]!r} is not a metric (choose from {', '.join(sorted(known))})")
    _check_task_options(o)


def _check_caches(o: Any) -> None:
    if o.cache_ratio and o.cache_mb:
        raise InputError("give cache_ratio (--cache-ratio) or cache_mb (--cache-mb), not both")
    if o.cache_device != "cuda":
        return
    if not (o.cache_ratio or o.cache_mb):
        raise InputError("cache_device cuda (--cache-device cuda) needs a size: --cache-mb (or --cache-ratio)")
    if o.num_workers:
        raise InputError(
            "cache_device cuda (--cache-device cuda) completes batches in the training process: use it "
            "with num_workers 0 (--num-workers 0)"
        )
    if o.device == "cpu" and not o.rehearse:
        raise InputError("cache_device cuda (--cache-device cuda) needs device cuda or auto (--device)")


def _check_task_options(o: Any) -> None:
    """Options of other tasks than ``o.task`` are refused rather than ignored."""
    if (o.task == "multi") != (o.tasks is not None):
        raise InputError("--task multi and a config file's tasks: go together (see the tasks guide)")
    if o.main_task is not None and o.task != "multi":
        raise InputError(f"main_task is an option of --task multi, not {o.task}")
    if o.task == "multi":
        from .multitask import task_specs  # its tasks' own options, each checked as a run of its own

        if o.cache_ratio or o.cache_mb:
            raise InputError(
                "--task multi reads no feature cache (--cache-ratio, --cache-mb): its tasks' batches differ"
            )

        task_specs(o)
        return
    if o.task == "link":
        given = [n for n in NODE_AND_EDGE if getattr(o, n) is not None] + (["loss"] if o.loss != "auto" else [])
        given += ["num_classes"] if o.num_classes is not None else []
        if given:
            raise InputError(f"{given[0]} is an option of --task node and edge, not link")
    else:
        given = [n for n in LINK_ONLY if getattr(o, n) is not None] + (
            ["negatives"] if o.negatives != "uniform" else []
        )
        if given:
            raise InputError(f"{given[0]} is an option of --task link, not {o.task}")
    if o.hard_negatives is not None and o.negatives != "hard":
        raise InputError("hard_negatives (--hard-negatives) gives the negatives of --negatives hard")
    if o.task == "node" and o.edge_type is not None:
        raise InputError("edge_type is an option of --task link and edge, not node")

"""What a checkpoint lets ``graphshard serve`` answer, checked before any rank starts: the hidden layer for
``/v1/embed`` (of the homogeneous stacks only), an edge task's edges (whose decoder must read their two ends
only: requests carry no edge features), and of a multi-task checkpoint the head asked for."""

from __future__ import annotations

from ..errors import InputError
from ..format.config import read_config
from ..tasks.options import TrainOptions

HIDDEN_MODELS = ("sage", "gcn", "gat", "gin")  # the homogeneous stacks: their hidden layer is served


def check_servable(opts: TrainOptions, embedding_layer: str, checkpoint: str, head: str | None = None) -> None:
    """An :class:`InputError` where the checkpoint's model (``opts``) cannot be served as asked (``head``: a
    multi-task checkpoint's task)."""
    if embedding_layer == "hidden":
        _check_hidden(opts)
    if opts.task != "multi":
        if head is not None:
            raise InputError(f"--head {head}: {checkpoint} is a checkpoint of one task (--task {opts.task})")
        _check_task(opts, checkpoint)
        return
    from ..tasks.multitask import main_task, task_specs  # a multi-task checkpoint: its tasks' options

    tasks = task_specs(opts)
    names = [t.name for t in tasks]
    if head is not None and head not in names:
        raise InputError(f"--head {head}: {checkpoint} has the tasks {', '.join(names)}")
    chosen = next(t for t in tasks if t.name == (head or main_task(opts, tasks).name))
    if embedding_layer == "hidden":
        raise InputError("--embedding-layer hidden: a multi-task checkpoint's service answers its head's outputs")
    _check_task(chosen.opts, checkpoint)


def _check_task(opts: TrainOptions, checkpoint: str) -> None:
    if opts.task == "edge" and opts.edge_feat is not None and opts.edge_decoder == "concat":
        raise InputError(
            f"{checkpoint}: the model's decoder reads each labelled edge's feature {opts.edge_feat!r}, which "
            "requests do not carry: graphshard serve answers edge tasks whose decoder reads the two ends only"
        )


def _check_hidden(opts: TrainOptions) -> None:
    """Where ``/v1/embed`` cannot answer the hidden layer."""
    assert opts.part_config is not None  # set by checkpoint_options
    cfg = read_config(opts.part_config)
    hetero = len(cfg.ntypes) > 1 or len(cfg.etypes) > 1
    if hetero or opts.model not in HIDDEN_MODELS or opts.num_layers < 2:
        raise InputError(
            f"--embedding-layer hidden: model {opts.model!r} ({'heterogeneous' if hetero else 'homogeneous'}, "
            f"{opts.num_layers} layers) has no hidden layer graphshard serve computes (the homogeneous "
            f"{', '.join(HIDDEN_MODELS)} of 2+ layers have); 'graphshard embed --embedding-layer hidden' "
            "writes it for any model, to serve as stale rows"
        )

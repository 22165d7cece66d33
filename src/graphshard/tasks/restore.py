"""Restoring a run: the options a checkpoint records, the model rebuilt from them, its weights and learnt input
embeddings restored on the graph it was trained on. ``graphshard embed`` (:mod:`graphshard.train`) and
``graphshard serve`` (:mod:`graphshard.serve`) both start here; neither needs the other."""

from __future__ import annotations

import os
from dataclasses import KW_ONLY, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from ..device.choice import check_device, local_ranks, rank_device
from ..distributed.host.environment import adopt_launcher_env
from ..distributed.runtime.graph import DistGraph
from ..distributed.runtime.session import Session
from ..distributed.transport.liveness import DEFAULT_LOST_AFTER
from ..errors import InputError
from ..format.config import PartitionConfig
from ..graph import EType
from ..models.registry import is_custom, load_factory
from .checkpoint import LATER_OPTIONS, RESUME_OPTIONS, load_checkpoint, read_state, run_identity
from .edge import EdgeRows, edge_model, edge_task
from .inputs import ModelInputs, build_model
from .link import link_model
from .loop import open_graph
from .multi import build_multi
from .node import node_task
from .options import TrainOptions


def checkpoint_options(
    part_config: str,
    checkpoint: str,
    out: str | None,
    timeout: float = 300.0,
    *,
    layer: str = "output",
    heartbeat_timeout: float = DEFAULT_LOST_AFTER,
    rank: int = 0,
) -> tuple[TrainOptions, int]:
    """The training options a checkpoint was written with (those that shape the model), and its rank count,
    read from rank ``rank``'s part of it (on a multi-host run without a shared file system, each host holds
    only its own ranks' parts)."""
    meta = read_state(Path(checkpoint) / f"rank{rank}")
    if meta is None:
        raise InputError(f"{checkpoint}: no checkpoint here for rank {rank} (rank{rank}/checkpoint.json is missing)")
    identity = meta.get("identity")
    needed = [k for k in RESUME_OPTIONS if k not in LATER_OPTIONS] + ["world_size"]
    if not isinstance(identity, dict) or any(k not in identity for k in needed):
        raise InputError(
            f"{checkpoint}: the checkpoint does not record the options of its run (written by an "
            "older graphshard): the model cannot be rebuilt"
        )
    recorded = {k: identity[k] for k in RESUME_OPTIONS if k in identity and k != "num_layers"}  # layers: fanouts
    opts = TrainOptions(
        part_config=str(part_config),
        checkpoint=str(checkpoint),
        save_embeddings=None if out is None else str(out),
        timeout=timeout,
        heartbeat_timeout=heartbeat_timeout,
        embedding_layer=layer,
        **recorded,
    )
    opts.check()
    return opts, int(identity["world_size"])


def checkpoint_run(
    part_config: str | os.PathLike,
    checkpoint: str | os.PathLike,
    num_procs: int | None,
    out: str | None = None,
    *,
    timeout: float = 300.0,
    layer: str = "output",
    heartbeat_timeout: float = DEFAULT_LOST_AFTER,
    verify: bool = True,
    colocated: bool = True,
    device: str = "cpu",
) -> TrainOptions:
    """The options of the run that wrote ``checkpoint`` (see :func:`checkpoint_options`), once the ranks about
    to use it are known to be as many as the run had: ``num_procs`` started here, or (None) the torchrun job
    this process belongs to. ``device``: what the model computes on (``cpu``, ``cuda``, ``auto``: see
    :mod:`graphshard.device.choice`), checked here, before any process starts."""
    if num_procs is None:
        adopt_launcher_env()
    rank = 0 if num_procs is not None else int(os.environ.get("RANK", "0"))
    opts, world = checkpoint_options(
        str(part_config), str(checkpoint), out, timeout, layer=layer, heartbeat_timeout=heartbeat_timeout, rank=rank
    )
    ranks = num_procs if num_procs is not None else int(os.environ.get("WORLD_SIZE", "1"))
    if ranks != world:
        raise InputError(f"{checkpoint}: the checkpoint was written by {world} ranks; run it on {world} (got {ranks})")
    check_device(device, num_procs or local_ranks())
    if is_custom(opts.model):  # the user's module imports here before any rank starts (embed, serve)
        load_factory(opts.model)
    return replace(opts, verify=verify, colocated=colocated, device=device)


@dataclass
class Restored:
    """A trained model as a checkpoint left it, on the graph it was trained on: ``model`` (for links, the
    whole link model), ``encoder`` (the part that gives node outputs), the node types whose outputs the task
    reads, the class count of node classification and the edge type of link prediction."""

    g: DistGraph
    inputs: ModelInputs
    model: torch.nn.Module
    encoder: torch.nn.Module
    _: KW_ONLY
    types: list[str]
    classes: int | None = None
    edge_type: EType | None = None
    label_kind: str | None = None  # of a node or edge task (train.labels)
    task: str = "node"
    tasks: list[Any] = field(default_factory=list)  # a multi-task model's tasks (train.multi's runners)


def restore(s: Session, opts: TrainOptions, cfg: PartitionConfig | None = None) -> Restored:
    """Open the graph, rebuild the model from ``opts`` (:func:`checkpoint_options`) and restore this rank's part
    of the checkpoint: weights and learnt input embeddings (collective)."""
    g = open_graph(opts, cfg)
    inputs = ModelInputs(g, opts)
    if opts.task == "node":
        task = node_task(s, g, opts)
        model = build_model(opts, inputs, task.classes, [task.target])
        restored = Restored(g, inputs, model, model, types=[task.target], classes=task.classes, label_kind=task.kind)
    elif opts.task == "multi":
        model, runners = build_multi(s, g, inputs, opts)
        types = list(dict.fromkeys(t for r in runners for t in r.types))
        restored = Restored(g, inputs, model, model.encoder, types=types, task="multi", tasks=runners)
    elif opts.task == "edge":
        edges = edge_task(s, g, opts)
        model = edge_model(opts, inputs, edges.etype, edges.classes, edge_dim=EdgeRows(g, edges.etype, opts).width)
        et = edges.etype
        restored = Restored(
            g,
            inputs,
            model,
            model.encoder,
            types=list(dict.fromkeys([et[0], et[2]])),
            classes=edges.classes,
            edge_type=et,
            label_kind=edges.kind,
            task="edge",
        )
    else:
        if opts.edge_type is None and len(g.canonical_etypes) > 1:
            raise InputError("the checkpoint's link run names no edge type and the graph has several")
        et = g.canonical_etype(opts.edge_type) if opts.edge_type else g.canonical_etypes[0]
        model = link_model(opts, inputs, et)
        restored = Restored(
            g, inputs, model, model.encoder, types=list(dict.fromkeys([et[0], et[2]])), edge_type=et, task="link"
        )
    directory = f"{opts.checkpoint}/rank{s.rank}"
    resumed = load_checkpoint(
        directory,
        model,
        torch.optim.Adam(model.parameters(), lr=opts.lr),
        run_identity(g.config, opts, s.world_size),
    )
    if resumed is None:
        raise InputError(f"{directory}: no checkpoint of rank {s.rank}")
    inputs.check_state(resumed[2], directory)
    inputs.load_state(resumed[2])
    g.barrier()  # every embedding shard is restored before anyone reads it
    device = rank_device(opts.device).device
    if device.type == "cuda":
        torch.cuda.set_device(device)
    model.to(device)  # the encoder is the model, or a part of it
    inputs.to(device)
    model.eval()
    return restored

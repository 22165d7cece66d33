"""``graphshard embed``: every node's output from a training checkpoint, without training — the model is
rebuilt from the options the checkpoint records (:mod:`graphshard.tasks.restore`), its weights (and learnt input
embeddings) restored, and the outputs computed layer by layer, then written in the user's original node order."""

from __future__ import annotations

import os

from ..device.choice import rank_device
from ..device.memory import named_out_of_memory
from ..distributed.host.lifetime import refuse_spawn_reimport
from ..distributed.ranks.launcher import launch
from ..distributed.runtime.session import session
from ..distributed.transport.liveness import DEFAULT_LOST_AFTER, doing, now_doing
from ..format.config import read_config
from ..memory import allowed
from ..models.contract import layerwise_traits
from ..tasks.compiled import warm_up
from ..tasks.embeddings import check_embeddings_target, every_output, save_tables
from ..tasks.options import TrainOptions
from ..tasks.restore import checkpoint_run, restore
from .cost import check_train_fits, evaluated


def embed(
    part_config: str | os.PathLike,
    checkpoint: str | os.PathLike,
    out: str | os.PathLike,
    num_procs: int | None = None,
    *,
    host: str = "127.0.0.1",
    timeout: float = 300.0,
    layer: str = "output",
    heartbeat_timeout: float = DEFAULT_LOST_AFTER,
    verify: bool = True,
    memory: int | str | None = None,
    colocated: bool = True,
    device: str = "cpu",
) -> None:
    """Write every node's output from a training checkpoint, as ``--save-embeddings`` does (``graphshard embed``).

    Args:
        part_config: the partition config (``<graph_name>.json``) of the partitions the run trained on.
        checkpoint: the checkpoint directory of the run (``<checkpoint>/best`` of a run: its best validation
            epoch).
        out: where to write: a ``.npy`` file, or for a heterogeneous graph a directory of
            ``<node type>.npy``.
        num_procs: start that many local ranks (the checkpoint's rank count); None: this process is one rank
            of a torchrun job of that size.
        host: the address every socket of the run listens on (127.0.0.1: this machine only).
        timeout: seconds any distributed wait may take.
        layer: ``output``, or ``hidden`` (the layer the last one reads).
        heartbeat_timeout: seconds without a heartbeat after which a rank is lost (0: off; see
            `graphshard.distributed.transport.liveness`).
        verify: check the partition files against their checksums first (see `DistGraph`).
        memory: what the processes started here may use together (bytes or a size such as ``16G``; default:
            the machine's memory): ``num_procs`` ranks predicted to need more (layer-wise inference, see
            ``graphshard plan``) are refused before any starts.
        colocated: read the partitions of other ranks on the same host in-process (see `DistGraph`).
        device: where the model computes, layer-wise chunk by chunk (``cpu``, ``cuda``, ``auto``; see
            `graphshard.infer.on_device`).

    Raises:
        InputError: no checkpoint for the rank, one that does not record its options, a checkpoint of
            another rank count, an unusable ``out`` or ``device``, or ranks predicted not to fit ``memory``.
        FormatError: an unreadable checkpoint, or a missing or corrupt partition config or file.
        DistError: a rank failed; names the rank.
    """
    refuse_spawn_reimport()
    opts = checkpoint_run(
        part_config,
        checkpoint,
        num_procs,
        str(out),
        timeout=timeout,
        layer=layer,
        heartbeat_timeout=heartbeat_timeout,
        verify=verify,
        colocated=colocated,
        device=device,
    )
    check_embeddings_target(out)
    if num_procs is None:
        _rank(opts)
        return
    assert opts.part_config is not None  # set by checkpoint_options
    cfg = read_config(opts.part_config)
    layers, outputs = evaluated(cfg, opts, opts.embedding_layer)
    check_train_fits(
        cfg,
        num_procs,
        num_procs,
        opts.hidden,
        layerwise=True,
        budget=allowed(memory),
        step="embed",
        layers=layers,
        outputs=outputs,
        colocated=opts.colocated,
    )
    warm_up()  # compiled here once (first run only), loaded from the cache by every rank
    launch(_rank, num_procs, (opts,), host, timeout=timeout)


def _rank(opts: TrainOptions) -> None:
    with (
        session(timeout=opts.timeout, heartbeat_timeout=opts.heartbeat_timeout) as s,
        named_out_of_memory(s.rank, rank_device(opts.device).device, now_doing),
    ):
        r = restore(s, opts)
        doing("computing embeddings")
        depth = layerwise_traits(r.encoder).num_layers or opts.num_layers
        layers = depth - 1 if opts.embedding_layer == "hidden" else None
        tables = every_output(s, r.g, r.encoder, r.inputs, opts=opts, types=r.types, name="embed", layers=layers)
        assert opts.save_embeddings is not None  # set to embed's output by checkpoint_options
        save_tables(s, r.g, tables, opts.save_embeddings)

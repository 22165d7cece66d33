"""The user's model (``--model package.module:factory``) tried on one sampled batch before the first
epoch, so a model that cannot train is one line naming the factory instead of a failure deep in an epoch:
the output must be one row of the expected width per node of the batch, and must change when the batch
does. Parameters the output does not use are allowed (DDP is then told to look for them)."""

from __future__ import annotations

from typing import Any

import torch

from ..distributed.loaders.loader import DistNeighborLoader
from ..distributed.runtime.graph import DistGraph
from ..errors import InputError
from ..models.registry import is_custom
from .inputs import ModelInputs, rows_of
from .options import TrainOptions

PROBE_SEEDS = 8


def check_custom_model(
    g: DistGraph,
    opts: TrainOptions,
    model: torch.nn.Module,
    inputs: ModelInputs,
    *,
    ntype: str,
    out_dim: int,
    seeds: torch.Tensor,
) -> None:
    """:class:`InputError` naming the factory unless ``model`` (the encoder of a link model) maps a batch
    sampled around ``seeds`` of ``ntype`` to one ``out_dim`` row per node of the batch, depending on it."""
    if not is_custom(opts.model):
        return
    ids = seeds[:PROBE_SEEDS] if seeds.numel() else torch.arange(min(PROBE_SEEDS, g.num_nodes(ntype)))
    with DistNeighborLoader(
        g,
        opts.fanouts,
        ids,
        PROBE_SEEDS,
        input_type=ntype if inputs.hetero else None,
        label_name=None,
        seed=opts.seed,
        **inputs.loader_options(),
    ) as loader:
        batch = next(iter(loader))
    args = inputs(batch)
    rows = (batch[ntype] if inputs.hetero else batch).num_nodes
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = _output(opts.model, model, args, ntype, rows=rows, out_dim=out_dim)
            moved = _output(opts.model, model, _changed(args), ntype, rows=rows, out_dim=out_dim)
        if torch.equal(out, moved):
            raise InputError(
                f"--model {opts.model}: the output does not depend on the batch (the same rows for "
                "other inputs and no edges)"
            )
        model.train()
        rows_of(model(*args), ntype).sum().backward()
        unused = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
        model.zero_grad(set_to_none=True)
    finally:
        model.train(was)
    # read by the trainer's DDP; torch types Module.__setattr__ for tensors and modules, any other value is
    # kept as a plain attribute
    model.find_unused = bool(unused)  # type: ignore[assignment]


def _output(name: str, model: torch.nn.Module, args: tuple, ntype: str, *, rows: int, out_dim: int) -> torch.Tensor:
    try:
        out = model(*args)
    except Exception as exc:  # the user's forward failing is reported, naming the factory
        raise InputError(f"--model {name}: the model failed on a batch: {type(exc).__name__}: {exc}") from None
    if isinstance(out, dict) and ntype not in out:
        raise InputError(f"--model {name}: the output has no rows of node type {ntype!r} (it has {list(out)})")
    out = rows_of(out, ntype)
    if not isinstance(out, torch.Tensor) or out.dim() != 2 or tuple(out.shape) != (rows, out_dim):
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise InputError(
            f"--model {name}: the output for a batch of {rows} nodes of type {ntype!r} is {shape}; "
            f"expected ({rows}, {out_dim}): one row of {out_dim} per node of the batch"
        )
    return out


def _changed(args: tuple) -> tuple:
    """The model's arguments with other inputs (random rows) and no edges."""
    x, edge_index, *rest = args
    generator = torch.Generator().manual_seed(1)

    def other(v: torch.Tensor) -> torch.Tensor:
        v = v.to_dense() if v.is_sparse else v
        return torch.randn(v.shape, generator=generator) + 1.0

    def no_edges(e: Any) -> Any:
        return e[:, :0]

    if isinstance(x, dict):
        return (
            {t: other(v) for t, v in x.items()},
            {et: no_edges(e) for et, e in edge_index.items()},
            *rest[:1],
            *({et: a[:0] for et, a in r.items()} for r in rest[1:]),
        )
    return (other(x), no_edges(edge_index), *rest[:1], *(r[:0] for r in rest[1:]))

"""Whether a checkpoint's tensors and optimiser settings can be this model's and optimiser's: loading would
cast, ignore or accept what does not fit, and the first step would fail far from the file. Each check names
what does not fit."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import torch

from ..errors import FormatError
from ..format.textconfig import shown


def is_number(value: Any) -> bool:
    """An int or a float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def finite_number(value: Any) -> bool:
    """A number a float can hold: finite, and no integer beyond any float (``math.isfinite`` raises on those)."""
    if not is_number(value):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def model_unfit(tensors: dict[str, torch.Tensor], model: torch.nn.Module) -> str | None:
    """A saved model tensor of another dtype than the model's (loading would cast it: int32 bytes read as
    float32 values); None when there is none."""
    own = model.state_dict()
    for k, v in tensors.items():
        if k.startswith("model/") and k[len("model/") :] in own and v.dtype != own[k[len("model/") :]].dtype:
            return f"{k} is {v.dtype}, the model's {own[k[len('model/') :]].dtype}"
    return None


def check_weights(directory: str | os.PathLike, weights: dict[str, torch.Tensor], model: torch.nn.Module) -> None:
    """:class:`FormatError` naming ``directory`` unless ``weights`` (of
    :func:`~graphshard.tasks.checkpoint.read_weights`) are exactly the model's tensors: the same names, shapes and
    dtypes (checked when a run resumes, not when it ends)."""
    own = model.state_dict()
    missing, extra = sorted(set(own) - set(weights)), sorted(set(weights) - set(own))
    wrong = [k for k in own if k in weights and (weights[k].shape != own[k].shape or weights[k].dtype != own[k].dtype)]
    if missing or extra or wrong:
        what = (
            f"missing {shown(missing[0])}"
            if missing
            else f"unexpected {shown(extra[0])}"
            if extra
            else f"{shown(wrong[0])} is {weights[wrong[0]].dtype} {tuple(weights[wrong[0]].shape)}, the model's "
            f"{own[wrong[0]].dtype} {tuple(own[wrong[0]].shape)}"
        )
        raise FormatError(f"{directory}: not a valid checkpoint of this model (tensor {what})")


def optimizer_unfit(
    tensors: dict[str, torch.Tensor], meta: dict[str, Any], optimizer: torch.optim.Optimizer
) -> str | None:
    """Why the saved optimiser state and settings cannot be this optimiser's, where loading them would not
    say so (it takes state of any shape, dtype or name, and settings of any name, which the first step would
    trip over or ignore); None when they fit."""
    saved_groups = meta["optimizer"]["param_groups"]
    groups = optimizer.param_groups
    ids = [i for s in saved_groups for i in (s.get("params") if isinstance(s.get("params"), list) else [None])]
    if (
        len(saved_groups) != len(groups)
        or any(
            not isinstance(s.get("params"), list) or len(s["params"]) != len(g["params"])
            for s, g in zip(saved_groups, groups)
        )
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
        or len(set(ids)) != len(ids)
    ):
        return "'param_groups' do not list this optimiser's parameters"
    for g in saved_groups:
        unknown = sorted(set(g) - set(optimizer.defaults) - {"params"}, key=str)
        if unknown:  # a misspelt setting: loading would keep it aside and take the default
            return f"'param_groups' hold {shown(unknown)}, no settings of this optimiser"
    params = {i: p for s, g in zip(saved_groups, groups) for i, p in zip(s["params"], g["params"])}
    names: dict[Any, set[str]] = {}
    # (opt, parameter index, state name) and the state: a tensor, or a scalar of the metadata (number, bool, None)
    entries: list[tuple[Sequence[str], torch.Tensor | float | None]] = [
        (k.split("/", 2), v) for k, v in tensors.items() if k.startswith("opt/")
    ]
    entries += [
        ((("opt", *k.split("/", 1)) if "/" in k else ("opt", k, "")), v)
        for k, v in meta["optimizer"]["scalars"].items()
    ]
    for parts, v in entries:
        idx = int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None
        if idx not in params:
            return f"optimiser state {'/'.join(parts)!r} is of no parameter of this model"
        names.setdefault(idx, set()).add(parts[2])
        if (
            isinstance(v, torch.Tensor)
            and parts[2] != "step"
            and (v.shape, v.dtype) != (params[idx].shape, params[idx].dtype)
        ):
            return (
                f"optimiser state {'/'.join(parts)!r} is {v.dtype}{list(v.shape)}, its parameter "
                f"{params[idx].dtype}{list(params[idx].shape)}"
            )
        if isinstance(v, torch.Tensor) and parts[2] == "step" and (v.dim() or not v.is_floating_point()):
            return f"optimiser state {'/'.join(parts)!r} must be a floating-point number, is {v.dtype}{list(v.shape)}"
    if len({frozenset(n) for n in names.values()}) > 1:
        kinds = sorted({", ".join(sorted(n)) for n in names.values()})
        return f"the parameters' optimiser states differ in kind ({'; '.join(kinds)})"
    return None


def settings_problem(optimizer: torch.optim.Optimizer) -> str | None:
    """A loaded optimiser setting of another type than the optimiser's default (a string as lr, a number as
    betas, a missing eps): the first step would fail, far from the file."""
    for g in optimizer.param_groups:
        for k, default in optimizer.defaults.items():
            if k not in g:
                return f"'param_groups' lack {k!r}"
            v = g[k]
            if isinstance(default, bool):
                ok = isinstance(v, bool)
            elif is_number(default):
                ok = finite_number(v)
            elif isinstance(default, (tuple, list)):
                ok = isinstance(v, (tuple, list)) and len(v) == len(default) and all(finite_number(x) for x in v)
            elif default is None:
                ok = v is None or isinstance(v, bool)
            else:
                ok = True
            if not ok:
                return f"'param_groups' {k!r} is {shown(v)}, not like the optimiser's {shown(default)}"
    return None

"""Checkpoints without pickles: model and optimiser tensors in safetensors, everything else in JSON.
Written atomically (temporary files, then rename; ``checkpoint.json`` last), read back exactly."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from ..errors import FormatError

STATE = "checkpoint.json"
TENSORS = "checkpoint.safetensors"


def _flatten(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    tensors = {f"model/{k}": v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    opt = optimizer.state_dict()
    scalars: dict[str, Any] = {}
    for idx, state in opt["state"].items():
        for name, value in state.items():
            if isinstance(value, torch.Tensor):
                tensors[f"opt/{idx}/{name}"] = value.detach().clone().contiguous()
            else:
                scalars[f"{idx}/{name}"] = value
    tensors["rng/torch"] = torch.get_rng_state()
    return tensors, {"param_groups": opt["param_groups"], "scalars": scalars}


def save_checkpoint(directory: str | os.PathLike, epoch: int, model: torch.nn.Module,
                    optimizer: torch.optim.Optimizer, history: list[dict],
                    extra: dict[str, torch.Tensor] | None = None) -> None:
    """Record the state after ``epoch`` (0-based) epochs have finished; ``extra``: more named tensors
    (e.g. the embedding rows this rank holds)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    tensors, opt_meta = _flatten(model, optimizer)
    tensors.update({f"extra/{k}": v.detach().clone().contiguous() for k, v in (extra or {}).items()})
    tmp = d / f".{TENSORS}.tmp"
    save_file(tensors, str(tmp))
    os.replace(tmp, d / TENSORS)
    meta = {"epoch": epoch, "optimizer": opt_meta, "history": history}
    tmp = d / f".{STATE}.tmp"
    tmp.write_text(json.dumps(meta))
    os.replace(tmp, d / STATE)


def load_checkpoint(directory: str | os.PathLike, model: torch.nn.Module, optimizer: torch.optim.Optimizer
                    ) -> tuple[int, list[dict], dict[str, torch.Tensor]] | None:
    """Restore model, optimiser and RNG; returns ``(next epoch, history, extra tensors)``, or None
    without a checkpoint."""
    d = Path(directory)
    if not (d / STATE).is_file():
        return None
    try:
        meta = json.loads((d / STATE).read_text())
        tensors = load_file(str(d / TENSORS))
    except (OSError, ValueError) as exc:
        raise FormatError(f"{d}: unreadable checkpoint ({exc})") from None
    model.load_state_dict({k[len("model/"):]: v for k, v in tensors.items() if k.startswith("model/")})
    state: dict[int, dict[str, Any]] = {}
    for k, v in tensors.items():
        if k.startswith("opt/"):
            _, idx, name = k.split("/", 2)
            state.setdefault(int(idx), {})[name] = v
    for k, v in meta["optimizer"]["scalars"].items():
        idx, name = k.split("/", 1)
        state.setdefault(int(idx), {})[name] = v
    optimizer.load_state_dict({"state": state, "param_groups": meta["optimizer"]["param_groups"]})
    torch.set_rng_state(tensors["rng/torch"])
    extra = {k[len("extra/"):]: v for k, v in tensors.items() if k.startswith("extra/")}
    return int(meta["epoch"]) + 1, list(meta["history"]), extra

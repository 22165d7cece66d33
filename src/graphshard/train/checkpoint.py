"""Checkpoints without pickles: model and optimiser tensors in safetensors, everything else in JSON.
Written atomically (temporary files, then rename; ``checkpoint.json`` last), read back exactly."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from ..errors import FormatError, InputError
from ..format.tensorfile import check_tensor_file, load_tensor_file

STATE = "checkpoint.json"
TENSORS = "checkpoint.safetensors"
# Options that change what the saved state means: resuming under other values would continue a
# different run (other model shape, other optimiser, other batches). Others (epochs, evaluation
# cadence, outputs, workers, timeouts) may change between a run and its resume.
RESUME_OPTIONS = ("task", "model", "fanouts", "batch_size", "hidden", "num_layers", "dropout", "lr", "seed", "num_classes",
                  "target", "embed_dim", "sparse_lr", "decoder", "neg_ratio", "edge_type", "weight_decay",
                  "lr_schedule", "lr_step", "lr_gamma", "feat", "label", "split_masks")
# How the heterogeneous GraphSAGE combines relations; checkpoints of older graphshard (summed relations,
# every relation built) record none and cannot be resumed by this model
HETERO_RELATIONS = "averaged, only those the outputs read"
LATER_OPTIONS = ("feat", "label", "split_masks")  # recorded since graphshard 0.1 named the data (default: resolved)


def run_identity(part_config: str, opts: Any, world_size: int) -> dict[str, Any]:
    """What a checkpoint must match to be resumed: the partitioned graph (its ID space and the checksums
    of its files), the number of ranks and the options in :data:`RESUME_OPTIONS`."""
    from ..format.config import read_config, run_fingerprint

    cfg = read_config(part_config)
    files = hashlib.sha256(json.dumps(cfg.checksums, sort_keys=True).encode()).hexdigest()
    graph = f"{cfg.graph_name} ({(cfg.run_fingerprint or run_fingerprint(cfg))[:12]}, files {files[:12]})"
    hetero_sage = opts.model == "sage" and (len(cfg.ntypes) > 1 or len(cfg.etypes) > 1)
    return {"graph": graph, "world_size": world_size, **{k: getattr(opts, k) for k in RESUME_OPTIONS},
            "relations": HETERO_RELATIONS if hetero_sage else None}


def read_state(directory: str | os.PathLike) -> dict[str, Any] | None:
    """The JSON part of a checkpoint (epoch, identity, history), or None when there is none."""
    path = Path(directory) / STATE
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text())
        int(meta["epoch"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FormatError(f"{path}: unreadable checkpoint ({exc})") from None
    return meta


def check_identity(directory: str | os.PathLike, meta: dict[str, Any], identity: dict[str, Any]) -> None:
    """Raise :class:`InputError` naming every difference between a checkpoint and this run."""
    saved = meta.get("identity")
    if not isinstance(saved, dict):
        raise InputError(f"{directory}: checkpoint records no run identity (written by an older graphshard); it "
                         "cannot be shown to belong to this run: remove it or use another --checkpoint directory")
    diff = [f"{k}: checkpoint {saved.get(k)!r}, this run {v!r}" for k, v in identity.items() if saved.get(k) != v]
    if diff:
        raise InputError(f"{directory}: checkpoint belongs to another run and cannot be resumed ({'; '.join(diff)}); "
                         "use another --checkpoint directory, or rerun with the checkpoint's settings")


def rank_status(directory: str | os.PathLike, identity: dict[str, Any]) -> dict[str, Any]:
    """One rank's checkpoint as the other ranks need to see it (JSON-able): the epoch it finished (-1: no
    checkpoint), or why it cannot be resumed by this run."""
    try:
        meta = read_state(directory)
        if meta is not None:
            check_identity(directory, meta, identity)
            check_tensor_file(Path(directory) / TENSORS, "checkpoint file")  # a truncated file fails before the run
    except (InputError, FormatError) as exc:
        return {"epoch": -1, "error": str(exc), "kind": type(exc).__name__}
    return {"epoch": -1 if meta is None else int(meta["epoch"])}


def check_agreement(directory: str | os.PathLike, statuses: list[dict[str, Any]]) -> int | None:
    """All ranks' :func:`rank_status` (in rank order) must describe one run at one finished epoch, or no
    checkpoint at all; returns that epoch (None: none). Raises naming the ranks at fault and their epochs."""
    bad = [r for r, st in enumerate(statuses) if "error" in st]
    if bad:
        first = statuses[bad[0]]
        also = f" (and ranks {bad[1:]} likewise)" if len(bad) > 1 else ""
        raise (FormatError if first["kind"] == "FormatError" else InputError)(first["error"] + also)
    epochs = [int(st["epoch"]) for st in statuses]
    if len(set(epochs)) > 1:
        at = ", ".join(f"rank {r} {'has none' if e < 0 else f'after epoch {e}'}" for r, e in enumerate(epochs))
        raise InputError(f"{directory}: the ranks' checkpoints disagree ({at}); they were not written by one "
                         "finished epoch of one run: remove them or restore a consistent set")
    return None if epochs[0] < 0 else epochs[0]


def check_checkpoints(directory: str | os.PathLike, identity: dict[str, Any], world_size: int) -> int | None:
    """Check every rank's checkpoint under ``directory`` (``rank<i>/``) before a run starts: all present or
    none, all at the same epoch, all of this run. Returns the epoch they finished, or None."""
    return check_agreement(directory, [rank_status(Path(directory) / f"rank{r}", identity) for r in range(world_size)])


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
                    extra: dict[str, torch.Tensor] | None = None, identity: dict[str, Any] | None = None) -> None:
    """Record the state after ``epoch`` (0-based) epochs have finished; ``extra``: more named tensors
    (e.g. the embedding rows this rank holds); ``identity``: see :func:`run_identity`."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    tensors, opt_meta = _flatten(model, optimizer)
    tensors.update({f"extra/{k}": v.detach().clone().contiguous() for k, v in (extra or {}).items()})
    tmp = d / f".{TENSORS}.tmp"
    save_file(tensors, str(tmp))
    os.replace(tmp, d / TENSORS)
    meta = {"epoch": epoch, "identity": identity, "optimizer": opt_meta, "history": history}
    tmp = d / f".{STATE}.tmp"
    tmp.write_text(json.dumps(meta))
    os.replace(tmp, d / STATE)


def read_weights(directory: str | os.PathLike) -> tuple[int, dict[str, torch.Tensor], dict[str, torch.Tensor]] | None:
    """The epoch, model tensors and extra tensors of a checkpoint (not the optimiser), or None without one."""
    d = Path(directory)
    meta = read_state(d)
    if meta is None:
        return None
    tensors = _read_tensors(d)
    model = {k[len("model/"):]: v for k, v in tensors.items() if k.startswith("model/")}
    extra = {k[len("extra/"):]: v for k, v in tensors.items() if k.startswith("extra/")}
    return int(meta["epoch"]), model, extra


def _read_tensors(directory: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint's safetensors file; :class:`FormatError` naming the file when it is
    missing, truncated, not safetensors (a ``torch.save`` pickle is refused, never unpickled) or holds no
    checkpoint."""
    path = directory / TENSORS
    tensors, _ = load_tensor_file(path, "checkpoint file")
    if "rng/torch" not in tensors or not any(k.startswith("model/") for k in tensors):
        raise FormatError(f"{path}: not a valid checkpoint file (a safetensors file without a checkpoint's "
                          "model/ and rng/torch tensors)")
    return tensors


def load_checkpoint(directory: str | os.PathLike, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    identity: dict[str, Any] | None = None) -> tuple[int, list[dict], dict[str, torch.Tensor]] | None:
    """Restore model, optimiser and RNG; returns ``(next epoch, history, extra tensors)``, or None
    without a checkpoint. With ``identity``, a checkpoint of another run is an :class:`InputError`."""
    d = Path(directory)
    meta = read_state(d)
    if meta is None:
        return None
    if identity is not None:
        check_identity(d, meta, identity)
    tensors = _read_tensors(d)
    try:
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
    except (RuntimeError, ValueError, KeyError, TypeError, AttributeError) as exc:  # another model's or tool's files
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise FormatError(f"{d}: not a valid checkpoint of this model and optimiser ({type(exc).__name__}: "
                          f"{reason})") from None
    extra = {k[len("extra/"):]: v for k, v in tensors.items() if k.startswith("extra/")}
    return int(meta["epoch"]) + 1, list(meta["history"]), extra

"""Checkpoints without pickles: model and optimiser tensors in safetensors, everything else in JSON.
Written atomically (temporary files, then rename; ``checkpoint.json`` last), read back exactly."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from ..errors import FormatError, InputError
from ..format.config import PartitionConfig, as_config, run_fingerprint
from ..format.tensorfile import check_tensor_file, load_tensor_file, sha256_file
from .checkpoint_fit import is_number, model_unfit, optimizer_unfit, settings_problem, shown

STATE = "checkpoint.json"
TENSORS = "checkpoint.safetensors"
STAGED = ".staged"  # a rank's checkpoint of an epoch not yet committed by every rank (see Trainer._checkpoint)
# Options recorded by later graphshard (its data names, attention models, then the label kinds, edge and
# multi-task runs, negatives), with what a checkpoint without them had: such a checkpoint is resumed as a run
# of those values
ADDED_DEFAULTS = {
    "heads": 4,
    "attn_dropout": 0.0,
    "edge_feat": None,
    "label_kind": None,
    "loss": "auto",
    "focal_gamma": 2.0,
    "class_weights": None,
    "edge_decoder": "concat",
    "negatives": "uniform",
    "edge_weight": None,
    "tasks": None,
    "main_task": None,
    "hard_negatives": None,
    "task_schedule": "sum",
}
# recorded since graphshard 0.1 named the data (default: resolved), and all those above
LATER_OPTIONS = ("feat", "label", "split_masks", *ADDED_DEFAULTS)
# Options that change what the saved state means: resuming under other values would continue a
# different run (other model shape, other optimiser, other batches). Others (epochs, evaluation
# cadence, outputs, workers, timeouts) may change between a run and its resume.
RESUME_OPTIONS = (
    "task",
    "model",
    "fanouts",
    "batch_size",
    "hidden",
    "num_layers",
    "dropout",
    "lr",
    "seed",
    "num_classes",
    "target",
    "embed_dim",
    "sparse_lr",
    "decoder",
    "neg_ratio",
    "edge_type",
    "weight_decay",
    "lr_schedule",
    "lr_step",
    "lr_gamma",
    *LATER_OPTIONS,
)
# How the heterogeneous GraphSAGE combines relations; checkpoints of older graphshard (summed relations,
# every relation built) record none and cannot be resumed by this model
HETERO_RELATIONS = "averaged, only those the outputs read"


def run_identity(part_config: str | os.PathLike | PartitionConfig, opts: Any, world_size: int) -> dict[str, Any]:
    """What a checkpoint must match to be resumed: the partitioned graph (its ID space and the checksums
    of its files; ``part_config``: its path, or the config already loaded), the number of ranks and the options
    in :data:`RESUME_OPTIONS`."""
    cfg = as_config(part_config)
    files = hashlib.sha256(json.dumps(cfg.checksums, sort_keys=True).encode()).hexdigest()
    graph = f"{cfg.graph_name} ({(cfg.run_fingerprint or run_fingerprint(cfg))[:12]}, files {files[:12]})"
    hetero_sage = opts.model in ("sage", "rsage") and (len(cfg.ntypes) > 1 or len(cfg.etypes) > 1)
    return {
        "graph": graph,
        "world_size": world_size,
        **{k: getattr(opts, k) for k in RESUME_OPTIONS},
        "relations": HETERO_RELATIONS if hetero_sage else None,
    }


def read_state(directory: str | os.PathLike) -> dict[str, Any] | None:
    """The JSON part of a checkpoint (epoch, identity, history), or None when there is none. Raises
    :class:`FormatError` naming the file (and the key) when it is no checkpoint's: not JSON, an epoch that
    is no non-negative integer, a history that is not records of numbers of increasing epochs up to it, no
    optimiser settings. A save cut off between its two files is completed first
    (:func:`finish_interrupted_save`)."""
    finish_interrupted_save(directory)
    path = Path(directory) / STATE
    if not os.path.lexists(path):
        return None
    try:
        if not path.is_file():
            raise ValueError("not a file")
        meta = json.loads(path.read_text())
    except RecursionError:
        raise FormatError(f"{path}: unreadable checkpoint (JSON nested too deeply)") from None
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise FormatError(f"{path}: unreadable checkpoint ({exc})") from None
    problem = _state_problem(meta)
    if problem:
        raise FormatError(f"{path}: unreadable checkpoint ({problem})")
    return meta


def _state_problem(meta: Any) -> str | None:
    """What makes a parsed ``checkpoint.json`` no checkpoint's (None: nothing)."""
    if not isinstance(meta, dict):
        return "not a JSON object"
    epoch = meta.get("epoch")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
        return f"'epoch' must be the last finished epoch, an integer >= 0; got {shown(epoch)}"
    history = meta.get("history")
    if not isinstance(history, list) or not history:
        return f"'history' must list a record per finished epoch; got {shown(history)}"
    last = -1
    for i, record in enumerate(history):
        if not isinstance(record, dict) or not all(v is None or isinstance(v, (int, float)) for v in record.values()):
            return f"'history'[{i}] must be a record of numbers; got {shown(record)}"
        at = record.get("epoch")
        if not isinstance(at, int) or isinstance(at, bool) or not last < at <= epoch:
            return (
                f"'history'[{i}]: 'epoch' must be an epoch after the record before it, up to the checkpoint's "
                f"epoch {epoch}; got {shown(at)}"
            )
        last = at
    digest = meta.get("tensors_sha256")
    if digest is not None and not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
        return f"'tensors_sha256' must be a sha256 in hex; got {shown(digest)}"
    opt = meta.get("optimizer")
    if (
        not isinstance(opt, dict)
        or not isinstance(opt.get("param_groups"), list)
        or not all(isinstance(g, dict) for g in opt["param_groups"])
        or not isinstance(opt.get("scalars"), dict)
    ):
        return f"'optimizer' must hold 'param_groups' (a list of objects) and 'scalars' (an object); got {shown(opt)}"
    for k, v in opt["scalars"].items():
        if not (is_number(v) or isinstance(v, bool) or v is None):
            return f"'optimizer' 'scalars' {k!r} must be a number; got {shown(v)}"
    return None


def check_identity(directory: str | os.PathLike, meta: dict[str, Any], identity: dict[str, Any]) -> None:
    """Raise :class:`InputError` naming every difference between a checkpoint and this run."""
    saved = meta.get("identity")
    if not isinstance(saved, dict):
        raise InputError(
            f"{directory}: checkpoint records no run identity (written by an older graphshard); it "
            "cannot be shown to belong to this run: remove it or use another --checkpoint directory"
        )
    diff = [
        f"{k}: checkpoint {saved.get(k, ADDED_DEFAULTS.get(k))!r}, this run {v!r}"
        for k, v in identity.items()
        if saved.get(k, ADDED_DEFAULTS.get(k)) != v
    ]
    if diff:
        raise InputError(
            f"{directory}: checkpoint belongs to another run and cannot be resumed ({'; '.join(diff)}); "
            "use another --checkpoint directory, or rerun with the checkpoint's settings"
        )


def rank_status(directory: str | os.PathLike, identity: dict[str, Any]) -> dict[str, Any]:
    """One rank's checkpoint as the other ranks need to see it (JSON-able): the epoch it finished (-1: no
    checkpoint), or why it cannot be resumed by this run."""
    try:
        meta = read_state(directory)
        if meta is not None:
            check_identity(directory, meta, identity)
            _check_tensor_header(Path(directory) / TENSORS)  # a truncated file fails before the run
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
        raise InputError(
            f"{directory}: the ranks' checkpoints disagree ({at}); they were not written by one "
            "finished epoch of one run: remove them or restore a consistent set"
        )
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
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # a GPU's dropout draws from its own generator
        tensors["rng/cuda"] = torch.cuda.get_rng_state()
    return tensors, {"param_groups": opt["param_groups"], "scalars": scalars}


def save_checkpoint(
    directory: str | os.PathLike,
    epoch: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    history: list[dict],
    extra: dict[str, torch.Tensor] | None = None,
    identity: dict[str, Any] | None = None,
) -> None:
    """Record the state after ``epoch`` (0-based) epochs have finished; ``extra``: more named tensors
    (e.g. the embedding rows this rank holds); ``identity``: see :func:`run_identity`."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    tensors, opt_meta = _flatten(model, optimizer)
    tensors.update({f"extra/{k}": v.detach().clone().contiguous() for k, v in (extra or {}).items()})
    tmp = d / f".{TENSORS}.tmp"
    save_file(tensors, str(tmp))
    digest = sha256_file(tmp)
    os.replace(tmp, d / TENSORS)
    meta = {"epoch": epoch, "identity": identity, "optimizer": opt_meta, "history": history, "tensors_sha256": digest}
    tmp = d / f".{STATE}.tmp"
    tmp.write_text(json.dumps(meta))
    os.replace(tmp, d / STATE)


def read_weights(directory: str | os.PathLike) -> tuple[int, dict[str, torch.Tensor], dict[str, torch.Tensor]] | None:
    """The epoch, model tensors and extra tensors of a checkpoint (not the optimiser), or None without one."""
    d = Path(directory)
    meta = read_state(d)
    if meta is None:
        return None
    tensors = _read_tensors(d, meta)
    model = {k[len("model/") :]: v for k, v in tensors.items() if k.startswith("model/")}
    extra = {k[len("extra/") :]: v for k, v in tensors.items() if k.startswith("extra/")}
    return int(meta["epoch"]), model, extra


# the names of a checkpoint's tensors: the model's state (its keys may hold any module name), the optimiser's
# state per parameter, the caller's extra tensors, the RNG state
_NAME = re.compile(r"model/.+|opt/[0-9]+/\w+|extra/.+|rng/torch|rng/cuda", re.ASCII | re.DOTALL)


def _check_tensor_header(path: Path) -> None:
    """:class:`FormatError` naming the file when it is missing, truncated, not safetensors (a ``torch.save``
    pickle is refused, never unpickled) or holds no checkpoint (reads the header only)."""
    header = check_tensor_file(path, "checkpoint file")
    if "rng/torch" not in header or not any(k.startswith("model/") for k in header):
        raise FormatError(
            f"{path}: not a valid checkpoint file (a safetensors file without a checkpoint's "
            "model/ and rng/torch tensors)"
        )
    other = [k for k in header if k != "__metadata__" and not _NAME.fullmatch(k)]
    if other:
        raise FormatError(
            f"{path}: not a valid checkpoint file (tensor {shown(other[0])} is none of a checkpoint's "
            "model/, opt/, extra/ and rng/ tensors)"
        )


def _read_tensors(directory: Path, meta: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint's safetensors file, after :func:`_check_tensor_header` and, when the state
    records it (checkpoints of graphshard 0.x before it do not), the file's sha256."""
    path = directory / TENSORS
    _check_tensor_header(path)
    recorded = meta.get("tensors_sha256")
    if recorded is not None and sha256_file(path) != recorded:
        raise FormatError(
            f"{path}: does not match the sha256 recorded in {directory / STATE} (the file is "
            "corrupt or was modified, or the pair was not written by one save)"
        )
    tensors, _ = load_tensor_file(path, "checkpoint file")
    return tensors


def finish_interrupted_save(directory: str | os.PathLike, staged: str = STAGED) -> bool:
    """Complete a save cut off between moving its two files out of the staging directory ``staged`` (the
    tensors moved, the state not yet: see ``Trainer._checkpoint``): when the staged state records the sha256 of
    the tensors now in place, move it into place too. Returns whether it did. Never touches anything else."""
    d = Path(directory)
    pending = d / staged / STATE
    if not pending.is_file() or not (d / TENSORS).is_file():
        return False
    try:
        recorded = json.loads(pending.read_text()).get("tensors_sha256")
    except (OSError, ValueError, AttributeError, RecursionError):
        return False
    if not isinstance(recorded, str) or sha256_file(d / TENSORS) != recorded:
        return False
    os.replace(pending, d / STATE)
    return True


def load_checkpoint(
    directory: str | os.PathLike,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    identity: dict[str, Any] | None = None,
) -> tuple[int, list[dict], dict[str, torch.Tensor]] | None:
    """Restore model, optimiser and RNG; returns ``(next epoch, history, extra tensors)``, or None
    without a checkpoint. With ``identity``, a checkpoint of another run is an :class:`InputError`."""
    d = Path(directory)
    meta = read_state(d)
    if meta is None:
        return None
    if identity is not None:
        check_identity(d, meta, identity)
    tensors = _read_tensors(d, meta)
    try:
        unfit = model_unfit(tensors, model)
        if unfit:
            raise ValueError(unfit)
        model.load_state_dict({k[len("model/") :]: v for k, v in tensors.items() if k.startswith("model/")})
        unfit = optimizer_unfit(tensors, meta, optimizer)
        if unfit:
            raise ValueError(unfit)
        state: dict[int, dict[str, Any]] = {}
        for k, v in tensors.items():
            if k.startswith("opt/"):
                _, idx, name = k.split("/", 2)
                state.setdefault(int(idx), {})[name] = v
        for k, v in meta["optimizer"]["scalars"].items():
            idx, name = k.split("/", 1)
            state.setdefault(int(idx), {})[name] = v
        optimizer.load_state_dict({"state": state, "param_groups": meta["optimizer"]["param_groups"]})
        unfit = settings_problem(optimizer)
        if unfit:
            raise ValueError(unfit)
        torch.set_rng_state(tensors["rng/torch"])
        if "rng/cuda" in tensors and torch.cuda.is_available():  # resumed on a GPU after a GPU's epoch
            torch.cuda.set_rng_state(tensors["rng/cuda"])
    except (RuntimeError, ValueError, KeyError, TypeError, AttributeError) as exc:  # another model's or tool's files
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise FormatError(
            f"{d}: not a valid checkpoint of this model and optimiser ({type(exc).__name__}: {reason})"
        ) from None
    extra = {k[len("extra/") :]: v for k, v in tensors.items() if k.startswith("extra/")}
    return int(meta["epoch"]) + 1, list(meta["history"]), extra

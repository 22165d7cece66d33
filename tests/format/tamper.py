"""Tampering with written partitions the way a bad copy, a buggy tool or a hostile input would."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np


def rewrite(path: Path, change: Callable[[dict[str, np.ndarray]], None], config: Path | None = None) -> None:
    """Apply ``change`` to the tensors of ``path`` in place, keeping the file's identity metadata.

    With ``config``, the file's checksum there is updated too (an internally inconsistent file that a
    checksum pass would accept)."""
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    from graphshard.format.tensorfile import sha256_file

    with safe_open(str(path), framework="np") as f:
        meta = f.metadata()
    tensors = load_file(path)
    change(tensors)
    save_file(tensors, path, metadata=meta)
    if config is not None:
        raw = json.loads(config.read_text())
        raw["checksums"][str(path.relative_to(config.parent))] = sha256_file(path)
        config.write_text(json.dumps(raw))


FINGERPRINT_FIELDS = (
    "graph_name",
    "num_parts",
    "halo_hops",
    "num_nodes",
    "num_edges",
    "ntypes",
    "etypes",
    "node_map",
    "edge_map",
    "feature_schema",
)


def restamp(config: Path) -> None:
    """Make an edited JSON internally consistent again, as a buggy tool rewriting a whole output would:
    recompute its ``run_fingerprint`` (as docs/format.md defines it) and stamp it, with fresh checksums,
    into every part file, so only the structural checks can tell that the JSON does not describe the files."""
    import hashlib

    from graphshard.format.tensorfile import sha256_file

    raw = json.loads(config.read_text())
    canonical = json.dumps({k: raw[k] for k in FINGERPRINT_FIELDS}, sort_keys=True, separators=(",", ":"))
    raw["run_fingerprint"] = hashlib.sha256(canonical.encode()).hexdigest()
    for p in range(raw["num_parts"]):
        for rel in raw[f"part-{p}"].values():
            retag(config.parent / rel, run_fingerprint=raw["run_fingerprint"])
            raw["checksums"][rel] = sha256_file(config.parent / rel)
    config.write_text(json.dumps(raw))


def retag(path: Path, **identity: str) -> None:
    """Change identity metadata of a part file in place (tensors unchanged)."""
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    with safe_open(str(path), framework="np") as f:
        meta = f.metadata()
    save_file(load_file(path), path, metadata={**meta, **identity})

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
    from graphshard.format.tensorfile import sha256_file
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    with safe_open(str(path), framework="np") as f:
        meta = f.metadata()
    tensors = load_file(path)
    change(tensors)
    save_file(tensors, path, metadata=meta)
    if config is not None:
        raw = json.loads(config.read_text())
        raw["checksums"][str(path.relative_to(config.parent))] = sha256_file(path)
        config.write_text(json.dumps(raw))

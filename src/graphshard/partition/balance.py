"""Balance classes from the ``--balance-ntypes`` option: one integer class per node, homogeneous order."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import InputError
from ..format.npyfile import read_npy


def option_classes(
    spec: str | None, ntypes: list[str], num_nodes: dict[str, int], train_mask: Callable[[str], np.ndarray | None]
) -> np.ndarray | None:
    """``None``: no constraint. ``"train"``: class ``2 × type index + training flag`` (so every node type and
    its training nodes are balanced apart; ``train_mask(t)`` returns a type's mask or None). Anything else: a
    ``.npy`` file of one integer per node (node types in order, then per-type IDs)."""
    if spec is None:
        return None
    if spec != "train":
        classes = read_npy(spec)
        if classes.ndim != 1 or (
            classes.size and not (np.issubdtype(classes.dtype, np.integer) or classes.dtype == bool)
        ):
            raise InputError(
                f"{spec}: must be a 1-D integer array of per-node classes, got {classes.dtype}{classes.shape}"
            )
        total = sum(num_nodes[t] for t in ntypes)
        if classes.shape[0] != total:
            raise InputError(
                f"{spec}: {classes.shape[0]} classes, but the graph has {total} nodes (one class per "
                "node: node types in order, then per-type IDs)"
            )
        return classes
    parts = []
    for i, t in enumerate(ntypes):
        mask = train_mask(t)
        flag = np.zeros(num_nodes[t], np.int64) if mask is None else np.asarray(mask, dtype=np.int64)
        if flag.shape != (num_nodes[t],):
            raise InputError(f"train_mask of node type {t!r} has shape {flag.shape}, expected ({num_nodes[t]},)")
        parts.append(2 * i + flag)
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)

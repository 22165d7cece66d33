"""Balance classes from the ``--balance-ntypes`` option: one integer class per node, homogeneous order."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import InputError


def option_classes(spec: str | None, ntypes: list[str], num_nodes: dict[str, int],
                    train_mask: Callable[[str], np.ndarray | None]) -> np.ndarray | None:
    """``None``: no constraint. ``"train"``: class ``2 × type index + training flag`` (so every node type and
    its training nodes are balanced apart; ``train_mask(t)`` returns a type's mask or None). Anything else: a
    ``.npy`` file of one integer per node (node types in order, then per-type IDs)."""
    if spec is None:
        return None
    if spec != "train":
        try:
            return np.load(spec, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InputError(f"{spec}: not a readable .npy file of per-node classes ({exc})") from None
    parts = []
    for i, t in enumerate(ntypes):
        mask = train_mask(t)
        flag = np.zeros(num_nodes[t], np.int64) if mask is None else np.asarray(mask, dtype=np.int64)
        if flag.shape != (num_nodes[t],):
            raise InputError(f"train_mask of node type {t!r} has shape {flag.shape}, expected ({num_nodes[t]},)")
        parts.append(2 * i + flag)
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)

"""Random assignment, balanced exactly: partition sizes (and, if given, the per-class counts) differ by ≤ 1."""

from __future__ import annotations

import numpy as np

_STREAM = 0x72616E64  # keeps this stream apart from other users of the same seed


def random_assignment(num_nodes: int, num_parts: int, seed: int, classes: np.ndarray | None = None) -> np.ndarray:
    """Assign each node a partition in ``[0, num_parts)`` uniformly at random but exactly balanced.

    Nodes are shuffled (seeded) and dealt round-robin. With ``classes`` (a per-node integer vector),
    nodes are dealt class by class, continuing the round-robin, so each partition gets the same
    number of nodes of every class, ±1, and the same number overall, ±1.
    """
    rng = np.random.default_rng([seed, _STREAM])
    order = rng.permutation(num_nodes)
    if classes is not None:
        order = order[np.argsort(classes[order], kind="stable")]
    parts = np.empty(num_nodes, dtype=np.int64)
    parts[order] = np.arange(num_nodes, dtype=np.int64) % num_parts
    return parts

"""Counter-based random bits for compiled kernels: a 64-bit word is a hash of a seed and a counter, so a draw
depends on where it is made, never on the order or the thread that makes it. The hash is SplitMix64's
finaliser (Steele, Lea and Flood, 2014), whose outputs over consecutive counters pass BigCrush.

numba's disk cache does not follow calls into other modules: a change here needs the kernels that inline it
recompiled (their files touched, or ``__pycache__`` cleared)."""

from __future__ import annotations

import numpy as np

from .jit import kernel

GOLDEN = 0x9E3779B97F4A7C15  # 2^64 / golden ratio: the step between consecutive counters' words


@kernel(inline="always")
def mix64(x: np.uint64) -> np.uint64:
    """SplitMix64's finaliser of ``x``: a bijection whose output bits each depend on every input bit."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))

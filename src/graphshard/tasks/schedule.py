"""Learning-rate schedules, as a pure function of the epoch (so a resumed run continues the same curve)."""

from __future__ import annotations

import math

SCHEDULES = ("constant", "cosine", "step")


def lr_at(schedule: str, lr: float, epoch: int, epochs: int, *, step: int = 10, gamma: float = 0.5) -> float:
    """The learning rate of ``epoch`` (0-based) of ``epochs``: ``constant``; ``cosine`` from ``lr`` down
    towards 0 over the run; ``step``: × ``gamma`` every ``step`` epochs."""
    if schedule == "constant":
        return lr
    if schedule == "cosine":
        return 0.5 * lr * (1.0 + math.cos(math.pi * epoch / max(1, epochs)))
    if schedule == "step":
        return lr * gamma ** (epoch // step)
    raise ValueError(f"unknown learning-rate schedule {schedule!r}")

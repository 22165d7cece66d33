"""Training options (the ``graphshard train`` flags) as one plain dataclass."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError


@dataclass
class TrainOptions:
    """``batch_size`` is the global mini-batch size: each of the ``W`` ranks takes ``ceil(batch_size / W)``
    seeds per step and DDP averages their gradients, so 1 rank and W ranks optimise alike."""

    part_config: str = ""
    task: str = "node"
    model: str = "sage"
    fanouts: list[int] = field(default_factory=lambda: [10, 10])
    batch_size: int = 1024
    hidden: int = 64
    num_layers: int = 2
    dropout: float = 0.5
    epochs: int = 10
    lr: float = 0.01
    num_workers: int = 0
    seed: int = 0
    eval_fanouts: list[int] | None = None  # default: every in-edge (-1) on every layer
    eval_batch_size: int = 4096
    metrics_out: str | None = None
    save_embeddings: str | None = None
    checkpoint: str | None = None
    timeout: float = 300.0
    progress: bool = True

    def check(self) -> None:
        if self.task != "node":
            raise InputError(f"task {self.task!r} is not available yet (only 'node' classification)")
        if self.model != "sage":
            raise InputError(f"unknown model {self.model!r} (available: sage)")
        if len(self.fanouts) != self.num_layers:
            raise InputError(f"{len(self.fanouts)} fanouts for {self.num_layers} layers")
        for name in ("batch_size", "hidden", "num_layers", "epochs"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be >= 1, got {getattr(self, name)}")

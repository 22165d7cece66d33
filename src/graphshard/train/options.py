"""Training options (the ``graphshard train`` flags) as one plain dataclass."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError
from .schedule import SCHEDULES

TASKS = ("node", "link")
MODELS = ("sage", "mlp")
DECODERS = ("dot", "mlp")


@dataclass
class TrainOptions:
    """``batch_size`` is the global mini-batch size (seed nodes, or positive edges for ``link``): each of
    the ``W`` ranks takes ``ceil(batch_size / W)`` per step and DDP averages their gradients, so 1 rank
    and W ranks optimise alike."""

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
    target: str | None = None  # node type to classify (default: the only type with labels)
    embed_dim: int = 0  # width of learnt inputs of featureless node types (0: hidden)
    sparse_lr: float = 0.05  # SparseAdagrad learning rate of those embeddings
    decoder: str = "dot"  # link: score of a node pair
    neg_ratio: float = 1.0  # link: random negative edges per positive in training
    eval_negatives: int = 100  # link: random destinations ranked against each positive (MRR)
    link_split: str | None = None  # link: held-out edges file (see train/link_split.py)
    edge_type: str | None = None  # link from a dataset: "src:rel:dst" to predict (needed with several)
    eval_every: int = 1  # validate after every n-th epoch (0: only after the last)
    eval_fanouts: list[int] | None = None  # default: every in-edge (-1) on every layer
    eval_batch_size: int = 4096
    metrics_out: str | None = None
    save_embeddings: str | None = None
    checkpoint: str | None = None
    timeout: float = 300.0
    progress: bool = True
    weight_decay: float = 0.0  # L2 penalty of Adam on the model's weights
    lr_schedule: str = "constant"  # constant | cosine | step (see graphshard.train.schedule)
    lr_step: int = 10  # step schedule: epochs between decays
    lr_gamma: float = 0.5  # step schedule: factor per decay
    print_epochs: bool = False  # rank 0 prints each epoch's line when it ends (the command line does)
    num_classes: int | None = None  # node: classes of the labels (default: the dataset's, else max label + 1)
    allow_nonfinite: bool = False  # train on NaN/infinite features and losses instead of stopping
    cache_ratio: float = 0.0  # remote-feature cache rows per rank, as a fraction of its partition's nodes
    cache_mb: float = 0.0  # or its size in megabytes (see graphshard.distributed.cache)

    def check(self) -> None:
        for name, value, allowed in (("task", self.task, TASKS), ("model", self.model, MODELS),
                                     ("decoder", self.decoder, DECODERS), ("lr_schedule", self.lr_schedule, SCHEDULES)):
            if value not in allowed:
                raise InputError(f"unknown {name} {value!r} (available: {', '.join(allowed)})")
        if len(self.fanouts) != self.num_layers:
            raise InputError(f"{len(self.fanouts)} fanouts for {self.num_layers} layers")
        for name in ("batch_size", "hidden", "num_layers", "epochs", "eval_negatives"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be >= 1, got {getattr(self, name)}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise InputError(f"seed must be a non-negative integer, got {self.seed!r}")
        if self.num_classes is not None and (isinstance(self.num_classes, bool) or self.num_classes < 1):
            raise InputError(f"num_classes must be >= 1, got {self.num_classes}")
        if self.eval_every < 0:
            raise InputError(f"eval_every must be >= 0, got {self.eval_every}")
        if self.eval_fanouts is not None and len(self.eval_fanouts) != self.num_layers:
            raise InputError(f"{len(self.eval_fanouts)} evaluation fanouts for {self.num_layers} layers")
        if not (0 <= self.weight_decay < float("inf")):
            raise InputError(f"weight_decay must be a finite number >= 0, got {self.weight_decay}")
        if self.lr_step < 1:
            raise InputError(f"lr_step must be >= 1, got {self.lr_step}")
        if not (0 < self.lr_gamma <= 1):
            raise InputError(f"lr_gamma must be in (0, 1], got {self.lr_gamma}")
        if self.cache_ratio and self.cache_mb:
            raise InputError("give cache_ratio or cache_mb, not both")
        for name in ("cache_ratio", "cache_mb"):
            value = getattr(self, name)
            if not (0 <= value < float("inf")):
                raise InputError(f"{name} must be a finite number >= 0, got {value}")
        for name in ("lr", "sparse_lr", "neg_ratio"):
            if getattr(self, name) <= 0:
                raise InputError(f"{name} must be positive, got {getattr(self, name)}")

"""Training options: one typed model (dataclasses whose fields carry a :class:`~.fields.Spec`) that drives
the ``graphshard train`` flags, the keys of its config file and the checks run before any process starts."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from ..device.choice import DEVICES, PRECISIONS
from ..distributed.transport.liveness import DEFAULT_LOST_AFTER
from ..distributed.transport.wire import WIRE_DTYPES
from ..errors import InputError
from ..models.registry import EDGE_DECODERS, model_help
from ..partition.methods import METHODS
from .fields import check_fields, option
from .labels import LABEL_KINDS
from .losses import LOSSES
from .negatives import NEGATIVES
from .option_checks import check_together
from .schedule import SCHEDULES

TASKS = ("node", "link", "edge", "multi")
DECODERS = ("dot", "mlp", "distmult")
EMBEDDING_LAYERS = ("output", "hidden")
CACHE_DEVICES = ("host", "cuda")
SPLITS = ("train", "val", "test")
POSITIVE = {"low": 0, "open_low": True}
NON_NEGATIVE = {"low": 0}
FINITE = {"high": float("inf"), "open_high": True}


@dataclass
class TrainOptions:
    """What to train and how.

    ``batch_size`` is the global mini-batch size (seed nodes, or positive edges for ``link``): each of the
    ``W`` ranks takes ``ceil(batch_size / W)`` per step and DDP averages their gradients, so 1 rank and W
    ranks optimise alike. Call `check` to validate (``train`` does, before starting any process). Every
    attribute is a key of the config file of ``graphshard train`` and, unless noted, its flag (``batch_size``
    is ``--batch-size``); the descriptions name the flags. A task named first (``node:``, ``link:``, ...)
    is the task the option is for.

    Attributes:
        part_config: partition config JSON (from 'partition' or 'dispatch').
        task: node: node labels (classes, 0/1 labels or regression targets); link: link prediction (held-out edges
            ranked by MRR/AUC); edge: labels of existing edges (classes or targets); multi: the config file's tasks.
        tasks: multi: the tasks of one run on a shared encoder (config file only): each a mapping with name, task
            (node, edge, link), weight, and its own target, edge_type, label, metric, loss, ...
        main_task: multi: the task whose first metric selects the best epoch (default: the first).
        task_schedule: multi: sum: a step takes a batch of every task and sums their losses times their weights (a
            task of fewer batches starts again); alternate: a step is one task's batch, every task once an epoch.
        model: the model: a built-in name (see `graphshard.models`); or your own, package.module:factory (a function
            given the sizes and types, returning a torch.nn.Module: see the docs).
        heads: attention heads of gat, rgat and hgt (the hidden width must be a multiple).
        attn_dropout: dropout of the attention coefficients of gat and rgat.
        edge_feat: edge feature given to the models that read one (gat, gin, your own) as edge_attr (default: none).
        fanouts: neighbours sampled per layer, a list (comma-separated as a flag) (-1: all); one value per layer, so
            this also sets the number of layers.
        batch_size: global mini-batch size, seed nodes or positive edges (split across ranks).
        hidden: hidden width.
        dropout: dropout probability.
        epochs: training epochs (at most: see --patience).
        lr: learning rate (Adam).
        weight_decay: L2 penalty on the weights (Adam).
        lr_schedule: learning rate over the epochs: constant; cosine from --lr towards 0 over --epochs; step: x
            --lr-gamma every --lr-step epochs.
        lr_step: step schedule: epochs between decays.
        lr_gamma: step schedule: factor per decay.
        patience: stop after this many epochs without a better validation metric (0: never; counted at the
            validations, see --eval-every).
        num_workers: sampler worker processes per rank.
        seed: random seed.
        feat: node feature name (default: feat, or x where the partitions hold x, as Graph.from_pyg makes them).
        label: node, edge: label name (default: label, or y).
        split_masks: node, edge: names of the train, validation and test masks, a list (comma-separated as a flag).
        target: node type to classify (default: the only node type with labels).
        num_classes: node, edge: number of label classes (default: the dataset's num_classes, else the largest label
            in the splits + 1); a split label outside them is an error.
        label_kind: node, edge: what the label asks (default: read from it: integers one per node -> classification;
            a 2-D 0/1 integer matrix -> multilabel; floats -> regression).
        metric: node, edge: metrics to report, a list (comma-separated as a flag); the first selects the best epoch
            (classification: accuracy, f1_micro, f1_macro, roc_auc, pr_auc; regression: rmse, mae, r2; default:
            accuracy,f1_macro; f1_micro,f1_macro; rmse,mae,r2).
        loss: node, edge: the training loss (auto: cross_entropy, bce for multilabel, mse for regression; focal for
            imbalanced classes; smooth_l1 for regression with outliers).
        focal_gamma: node, edge: focal loss's gamma (0: cross-entropy).
        class_weights: node, edge: weigh classes (multilabel: each label's positives) in the loss: auto (balanced,
            from the training labels) or a .npy file of one weight per class.
        embed_dim: width of the learnt inputs of node types without features (0: --hidden).
        sparse_lr: learning rate of those inputs (sparse Adagrad).
        cache_ratio: cache the features of the remote nodes each rank's batches read most, this many x the
            partition's own nodes in rows (0: no cache).
        cache_mb: the same cache, sized in megabytes per rank.
        cache_device: where that cache is: host memory (rows of other ranks), or the GPU (cuda: the rows this rank's
            batches read most, its own and others', kept on the device; needs --device cuda and --num-workers 0).
        device: what the model computes on: cpu, cuda (rank with LOCAL_RANK r takes cuda:r; more ranks than devices
            share them round robin), or auto (cuda where a device is visible); sampling stays on the CPU cores.
        precision: fp32, or bf16-mixed: forward and loss under bfloat16 autocast, weights and optimiser in fp32.
        wire_dtype: how training batches receive other ranks' dense float feature rows: as stored, or compact:
            floats as float16/bfloat16 (half the bytes on the network, rounded), integers in the narrowest type that
            holds them (exact).
        decoder: link: how a pair is scored: inner product, MLP, or DistMult (relation-aware) (one of: dot, mlp,
            distmult).
        negatives: link: negative pairs of training: uniform random pairs; in-batch (other positives' destinations);
            joint (ceil(--neg-ratio) random destinations shared by a batch); hard (sampled in-neighbours of the
            destination).
        hard_negatives: link, with --negatives hard: edge data giving each edge's hard negatives (original
            destination IDs, a row of k per edge, -1: none) instead of sampled in-neighbours.
        edge_weight: link: edge data weighing each training edge in the loss (a number >= 0 per edge).
        edge_decoder: edge: how a labelled edge's outputs are made from its ends' representations: an MLP of both
            (and of the edge's --edge-feat), their inner product (one output), or DistMult (a relation per output)
            (one of: concat, dot, distmult).
        neg_ratio: link: random negative edges per positive.
        eval_negatives: link: random destinations each held-out edge is ranked against.
        hits_k: link: K of Hits@K (share of held-out edges ranked K or better).
        filtered: link: also filtered MRR and Hits@K, the candidates that are known edges (training, validation,
            test) left out of each list; selects on filtered MRR.
        edge_type: link, with --dataset: the edge type to predict, src:rel:dst (needed when the graph has several);
            edge: the edge type whose labels to learn (default: the only one with labels).
        link_split: link, with --part-config: the held-out edges file (safetensors).
        eval_every: validate after every n-th epoch (0: after the last only).
        eval_fanouts: neighbours sampled per layer when evaluating (default: all, computed layer by layer).
        eval_batch_size: seeds per evaluation batch with --eval-fanouts.
        metrics_out: write per-epoch metrics (rewritten after every epoch) and the final test figures to this JSON
            file.
        log_dir: write TensorBoard event files (where the tensorboard package is installed) and metrics.csv to this
            directory, live.
        save_embeddings: write every node's representation (of the best validation epoch) in original ID order: a
            .npy file, or for a heterogeneous graph a directory of <node type>.npy.
        embedding_layer: what --save-embeddings writes: the model's output (node: class scores; link: the encoder's
            output) or the hidden layer before it.
        checkpoint: directory for checkpoints (and best/, the best validation epoch); an interrupted run resumes
            from it.
        timeout: seconds any distributed wait may take.
        heartbeat_timeout: seconds without a heartbeat after which a rank (its link, process or host) is lost and
            the run stops, naming it (0: off).
        verify: check the partition files each rank serves against the sha256 checksums of the partition config
            before training on them (--no-verify skips it).
        colocated: read the partitions of other ranks on the same host from their files in-process (shared page
            cache) instead of over RPC, when they are the same files (--no-colocated: always RPC).
        allow_nonfinite: train on NaN or infinite features and losses instead of stopping with an error.
        progress: progress bars (no command-line flag).
        rehearse: take the GPU's path on the CPU: batches copied through the device buffers, a device cache in host
            memory (how machines without a GPU test that path) (no command-line flag).
        print_epochs: rank 0 prints each epoch's line as it ends (no command-line flag).
    """

    part_config: str | None = option(
        None, "str", "partition config JSON (from 'partition' or 'dispatch')", optional=True
    )
    task: str = option(
        "node",
        "str",
        "node: node labels (classes, 0/1 labels or regression targets); link: link prediction (held-out edges "
        "ranked by MRR/AUC); edge: labels of existing edges (classes or targets); multi: the config file's tasks",
        choices=TASKS,
    )
    tasks: list[dict] | None = option(
        None,
        "records",
        "multi: the tasks of one run on a shared encoder (config file only): each a mapping with name, task "
        "(node, edge, link), weight, and its own target, edge_type, label, metric, loss, ...",
        optional=True,
        cli=False,
        config_only=True,
    )
    main_task: str | None = option(
        None, "str", "multi: the task whose first metric selects the best epoch (default: the first)", optional=True
    )
    _: KW_ONLY
    task_schedule: str = option(
        "sum",
        "str",
        "multi: sum: a step takes a batch of every task and sums their losses times their weights (a task of fewer "
        "batches starts again); alternate: a step is one task's batch, every task once an epoch",
        choices=("sum", "alternate"),
    )
    model: str = option(
        "sage",
        "str",
        f"{model_help()}; or your own, package.module:factory (a function given the "
        "sizes and types, returning a torch.nn.Module: see the docs)",
        metavar="NAME",
    )
    heads: int = option(4, "int", "attention heads of gat, rgat and hgt (the hidden width must be a multiple)", low=1)
    attn_dropout: float = option(
        0.0, "float", "dropout of the attention coefficients of gat and rgat", low=0, high=1, open_high=True
    )
    edge_feat: str | None = option(
        None,
        "str",
        "edge feature given to the models that read one (gat, gin, your own) as edge_attr (default: none)",
        optional=True,
    )
    fanouts: list[int] = option(
        [10, 10],
        "ints",
        "neighbours sampled per layer, comma-separated (-1: all); one "
        "value per layer, so this also sets the number of layers",
        int_items=(1, -1),
    )
    batch_size: int = option(
        1024, "int", "global mini-batch size, seed nodes or positive edges (split across ranks)", low=1
    )
    hidden: int = option(64, "int", "hidden width", low=1)
    dropout: float = option(0.5, "float", "dropout probability", low=0, high=1, open_high=True)
    epochs: int = option(10, "int", "training epochs (at most: see --patience)", low=1)
    lr: float = option(0.01, "float", "learning rate (Adam)", **POSITIVE, **FINITE)
    weight_decay: float = option(0.0, "float", "L2 penalty on the weights (Adam)", **NON_NEGATIVE, **FINITE)
    lr_schedule: str = option(
        "constant",
        "str",
        "learning rate over the epochs: constant; cosine from --lr towards "
        "0 over --epochs; step: x --lr-gamma every --lr-step epochs",
        choices=SCHEDULES,
    )
    lr_step: int = option(10, "int", "step schedule: epochs between decays", low=1)
    lr_gamma: float = option(0.5, "float", "step schedule: factor per decay", low=0, high=1, open_low=True)
    patience: int = option(
        0,
        "int",
        "stop after this many epochs without a better validation metric (0: never; "
        "counted at the validations, see --eval-every)",
        low=0,
    )
    num_workers: int = option(0, "int", "sampler worker processes per rank", low=0)
    seed: int = option(0, "int", "random seed", low=0)
    feat: str | None = option(
        None,
        "str",
        "node feature name (default: feat, or x where the partitions hold x, as Graph.from_pyg makes them)",
        optional=True,
    )
    label: str | None = option(None, "str", "node, edge: label name (default: label, or y)", optional=True)
    split_masks: list[str] = option(
        ["train_mask", "val_mask", "test_mask"],
        "strs",
        "node, edge: names of the train, validation and test masks, comma-separated",
    )
    target: str | None = option(
        None, "str", "node type to classify (default: the only node type with labels)", optional=True
    )
    num_classes: int | None = option(
        None,
        "int",
        "node, edge: number of label classes (default: the dataset's "
        "num_classes, else the largest label in the splits + 1); a split label outside "
        "them is an error",
        optional=True,
        low=1,
    )
    label_kind: str | None = option(
        None,
        "str",
        "node, edge: what the label asks (default: read from it: integers one per node -> classification; a 2-D 0/1 "
        "integer matrix -> multilabel; floats -> regression)",
        optional=True,
        choices=LABEL_KINDS,
    )
    metric: list[str] | None = option(
        None,
        "strs",
        "node, edge: metrics to report, comma-separated; the first selects the best epoch (classification: accuracy, "
        "f1_micro, f1_macro, roc_auc, pr_auc; regression: rmse, mae, r2; default: accuracy,f1_macro; "
        "f1_micro,f1_macro; rmse,mae,r2)",
        optional=True,
    )
    loss: str = option(
        "auto",
        "str",
        "node, edge: the training loss (auto: cross_entropy, bce for multilabel, mse for regression; focal for "
        "imbalanced classes; smooth_l1 for regression with outliers)",
        choices=LOSSES,
    )
    focal_gamma: float = option(
        2.0, "float", "node, edge: focal loss's gamma (0: cross-entropy)", **NON_NEGATIVE, **FINITE
    )
    class_weights: str | None = option(
        None,
        "str",
        "node, edge: weigh classes (multilabel: each label's positives) in the loss: auto (balanced, from the "
        "training labels) or a .npy file of one weight per class",
        optional=True,
        metavar="auto|FILE",
    )
    embed_dim: int = option(0, "int", "width of the learnt inputs of node types without features (0: --hidden)", low=0)
    sparse_lr: float = option(0.05, "float", "learning rate of those inputs (sparse Adagrad)", **POSITIVE, **FINITE)
    cache_ratio: float = option(
        0.0,
        "float",
        "cache the features of the remote nodes each rank's batches read "
        "most, this many x the partition's own nodes in rows (0: no cache)",
        metavar="ALPHA",
        **NON_NEGATIVE,
        **FINITE,
    )
    cache_mb: float = option(
        0.0, "float", "the same cache, sized in megabytes per rank", metavar="MB", **NON_NEGATIVE, **FINITE
    )
    cache_device: str = option(
        "host",
        "str",
        "where that cache is: host memory (rows of other ranks), or the GPU (cuda: the rows this rank's batches "
        "read most, its own and others', kept on the device; needs --device cuda and --num-workers 0)",
        choices=CACHE_DEVICES,
    )
    device: str = option(
        "cpu",
        "str",
        "what the model computes on: cpu, cuda (rank with LOCAL_RANK r takes cuda:r; more ranks than devices "
        "share them round robin), or auto (cuda where a device is visible); sampling stays on the CPU cores",
        choices=DEVICES,
    )
    precision: str = option(
        "fp32",
        "str",
        "fp32, or bf16-mixed: forward and loss under bfloat16 autocast, weights and optimiser in fp32",
        choices=PRECISIONS,
    )
    wire_dtype: str = option(
        "stored",
        "str",
        "how training batches receive other ranks' dense float feature rows: "
        "as stored, or compact: floats as float16/bfloat16 (half the bytes on the network, "
        "rounded), integers in the narrowest type that holds them (exact)",
        choices=WIRE_DTYPES,
    )
    decoder: str = option(
        "dot", "str", "link: how a pair is scored: inner product, MLP, or DistMult (relation-aware)", choices=DECODERS
    )
    negatives: str = option(
        "uniform",
        "str",
        "link: negative pairs of training: uniform random pairs; in-batch (other positives' destinations); joint "
        "(ceil(--neg-ratio) random destinations shared by a batch); hard (sampled in-neighbours of the destination)",
        choices=NEGATIVES,
    )
    hard_negatives: str | None = option(
        None,
        "str",
        "link, with --negatives hard: edge data giving each edge's hard negatives (original destination IDs, "
        "a row of k per edge, -1: none) instead of sampled in-neighbours",
        optional=True,
        metavar="NAME",
    )
    edge_weight: str | None = option(
        None, "str", "link: edge data weighing each training edge in the loss (a number >= 0 per edge)", optional=True
    )
    edge_decoder: str = option(
        "concat",
        "str",
        "edge: how a labelled edge's outputs are made from its ends' representations: an MLP of both (and of "
        "the edge's --edge-feat), their inner product (one output), or DistMult (a relation per output)",
        choices=EDGE_DECODERS,
    )
    neg_ratio: float = option(1.0, "float", "link: random negative edges per positive", **POSITIVE, **FINITE)
    eval_negatives: int = option(100, "int", "link: random destinations each held-out edge is ranked against", low=1)
    hits_k: int = option(10, "int", "link: K of Hits@K (share of held-out edges ranked K or better)", low=1)
    filtered: bool = option(
        False,
        "bool",
        "link: also filtered MRR and Hits@K, the candidates that are known "
        "edges (training, validation, test) left out of each list; selects on filtered MRR",
    )
    edge_type: str | None = option(
        None,
        "str",
        "link, with --dataset: the edge type to predict, src:rel:dst (needed when the graph has several); edge: "
        "the edge type whose labels to learn (default: the only one with labels)",
        optional=True,
    )
    link_split: str | None = option(
        None, "str", "link, with --part-config: the held-out edges file (safetensors)", optional=True
    )
    eval_every: int = option(1, "int", "validate after every n-th epoch (0: after the last only)", low=0)
    eval_fanouts: list[int] | None = option(
        None,
        "ints",
        "neighbours sampled per layer when evaluating (default: all, computed layer by layer)",
        optional=True,
        int_items=(1, -1),
    )
    eval_batch_size: int = option(4096, "int", "seeds per evaluation batch with --eval-fanouts", low=1)
    metrics_out: str | None = option(
        None,
        "str",
        "write per-epoch metrics (rewritten after every epoch) and the final test figures to this JSON file",
        optional=True,
    )
    log_dir: str | None = option(
        None,
        "str",
        "write TensorBoard event files (where the tensorboard package is "
        "installed) and metrics.csv to this directory, live",
        optional=True,
    )
    save_embeddings: str | None = option(
        None,
        "str",
        "write every node's representation (of the best validation "
        "epoch) in original ID order: a .npy file, or for a heterogeneous graph a "
        "directory of <node type>.npy",
        optional=True,
    )
    embedding_layer: str = option(
        "output",
        "str",
        "what --save-embeddings writes: the model's output (node: class "
        "scores; link: the encoder's output) or the hidden layer before it",
        choices=EMBEDDING_LAYERS,
    )
    checkpoint: str | None = option(
        None,
        "str",
        "directory for checkpoints (and best/, the best validation epoch); an interrupted run resumes from it",
        optional=True,
    )
    timeout: float = option(300.0, "float", "seconds any distributed wait may take", **POSITIVE)
    heartbeat_timeout: float = option(
        DEFAULT_LOST_AFTER,
        "float",
        "seconds without a heartbeat after which a rank (its link, "
        "process or host) is lost and the run stops, naming it (0: off)",
        **NON_NEGATIVE,
        **FINITE,
    )
    verify: bool = option(
        True,
        "bool",
        "check the partition files each rank serves against the sha256 checksums "
        "of the partition config before training on them (--no-verify skips it)",
    )
    colocated: bool = option(
        True,
        "bool",
        "read the partitions of other ranks on the same host from their files in-process (shared page "
        "cache) instead of over RPC, when they are the same files (--no-colocated: always RPC)",
    )
    allow_nonfinite: bool = option(
        False, "bool", "train on NaN or infinite features and losses instead of stopping with an error"
    )
    progress: bool = option(True, "bool", "progress bars", cli=False)
    rehearse: bool = option(
        False,
        "bool",
        "take the GPU's path on the CPU: batches copied through the device buffers, a device cache in host "
        "memory (how machines without a GPU test that path)",
        cli=False,
    )
    print_epochs: bool = option(False, "bool", "rank 0 prints each epoch's line as it ends", cli=False)

    @property
    def num_layers(self) -> int:
        return len(self.fanouts)

    @property
    def mask_names(self) -> dict[str, str]:
        """Split name (train/val/test) -> mask name."""
        return dict(zip(SPLITS, self.split_masks))

    def check(self) -> None:
        """Check every option's type and range, and that the options fit together.

        Raises:
            InputError: names the first option out of its type or range, or options that do not fit together.
        """
        try:
            check_fields(self)
        except ValueError as exc:
            raise InputError(f"option {exc}") from None
        check_together(self)


@dataclass
class LaunchOptions:
    """Where the ranks run and on what: the rest of a ``graphshard train`` configuration."""

    dataset: str | None = option(
        None,
        "str",
        "dataset directory (meta.json) or chunked graph, partitioned into --work-dir first (instead of --part-config)",
        optional=True,
    )
    work_dir: str = option("out/train", "str", "where --dataset is partitioned")
    method: str = option("metis", "str", "how --dataset is partitioned", choices=METHODS)
    num_procs: int | None = option(
        None, "int", "start this many local ranks (omit under torchrun)", optional=True, low=1
    )
    _: KW_ONLY
    host: str = option(
        "127.0.0.1",
        "str",
        "address every socket of the run listens on (127.0.0.1: this machine only); beyond loopback every "
        "process needs the job's secret (GRAPHSHARD_SECRET or --secret-file), or --insecure",
    )
    memory: str | None = option(
        None,
        "str",
        "memory the processes started here may use together, e.g. 16G "
        "(default: the machine's); a run predicted to need more is refused before it starts "
        "(see 'graphshard plan --part-config')",
        optional=True,
    )

    def check(self) -> None:
        try:
            check_fields(self)
        except ValueError as exc:
            raise InputError(f"option {exc}") from None

"""Training commands: ``train`` (on partitions or a dataset) and ``demo`` (the main job on a generated graph)."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from .common import (cluster_flags, command, dataset_flag, fraction, int_list, method_flag, non_negative_float,
                     non_negative_int, overwrite_flag, positive_float, positive_int, seed_flag)


def options(args: argparse.Namespace, part_config: str = "") -> Any:
    """The :class:`~graphshard.train.TrainOptions` the flags describe."""
    from ..train import TrainOptions

    return TrainOptions(part_config=part_config, task=args.task, model=args.model, fanouts=args.fanouts,
                        batch_size=args.batch_size, hidden=args.hidden, num_layers=len(args.fanouts),
                        dropout=args.dropout, epochs=args.epochs, lr=args.lr, num_workers=args.num_workers,
                        seed=args.seed, target=args.target, embed_dim=args.embed_dim, sparse_lr=args.sparse_lr,
                        decoder=args.decoder, neg_ratio=args.neg_ratio, eval_negatives=args.eval_negatives,
                        link_split=args.link_split, eval_every=args.eval_every, edge_type=args.edge_type,
                        eval_fanouts=args.eval_fanouts, metrics_out=args.metrics_out,
                        save_embeddings=args.save_embeddings, checkpoint=args.checkpoint, timeout=args.timeout,
                        num_classes=args.num_classes, allow_nonfinite=args.allow_nonfinite,
                        cache_ratio=args.cache_ratio, cache_mb=args.cache_mb, weight_decay=args.weight_decay,
                        lr_schedule=args.lr_schedule, lr_step=args.lr_step, lr_gamma=args.lr_gamma,
                        print_epochs=True)


def print_metrics(m: dict, epochs: bool = False) -> None:
    """The test result and where the time went (and the per-epoch lines with ``epochs``: rank 0 prints
    them as the epochs end)."""
    from ..train.report import epoch_line
    from ..train.timing import describe

    link = m.get("task") == "link"
    for e in m["epochs"] if epochs else []:
        print(epoch_line(e))
    keys = ("wall_s", "wait_s", "sample_s", "fetch_s", "compute_s", "comm_s", "fetch_bytes", "cache_hits",
            "cache_misses")
    total = {k: sum(e.get(k, 0) for e in m["epochs"]) for k in keys}
    other = max(0.0, total["wall_s"] - total["wait_s"] - total["compute_s"] - total["comm_s"])
    where = f"on {m['world_size']} processes x {m['num_parts']} partitions"
    if link:
        print(f"test MRR {m['test_mrr']:.4f} (random scores: {m['random_mrr']:.4f}), AUC {m['test_auc']:.4f} {where}")
    else:
        print(f"test accuracy {m['test_acc']:.4f} (val {m['val_acc']:.4f}) {where}")
    print(f"time: {describe(m['time'])}")
    cache = ""
    if "cache_rows" in m:
        asked = total["cache_hits"] + total["cache_misses"]
        cache = (f"; feature cache {m['cache_rows']:,} rows ({m['cache_bytes'] / 1e6:.1f} MB, built in "
                 f"{m['cache_build_s']:.1f} s) served {total['cache_hits'] / max(1, asked):.0%} of remote rows")
    if any(e.get("background") for e in m["epochs"]):
        batches = (f"waiting for batches {total['wait_s']:.1f} (built in the background: sampling "
                   f"{total['sample_s']:.1f} + feature fetch {total['fetch_s']:.1f})")
    else:
        batches = f"sampling {total['sample_s']:.1f} + feature fetch {total['fetch_s']:.1f}"
    print(f"training epochs {total['wall_s']:.1f} s = {batches} + compute {total['compute_s']:.1f} + gradient sync "
          f"{total['comm_s']:.1f} + other {other:.1f}; {total['fetch_bytes'] / 1e6:.1f} MB of features fetched from "
          f"other ranks{cache}")


def run_train(args: argparse.Namespace) -> None:
    from ..errors import InputError
    from ..train import train

    if bool(args.part_config) == bool(args.dataset):
        raise InputError("give exactly one of --part-config or --dataset")
    m = train(options(args, args.part_config or ""), args.num_procs, args.dataset, args.work_dir, args.method,
              args.host)
    if int(os.environ.get("RANK", "0")) == 0:
        print_metrics(m)


def run_demo(args: argparse.Namespace) -> None:
    from ..datasets import community_graph
    from ..partition.api import partition_graph
    from ..stats import format_stats, partitioning_stats
    from ..train import train
    from .partition import dataset_balance

    out = Path(args.out)
    start = time.perf_counter()
    ds = community_graph(num_nodes=args.nodes, noise=args.noise, seed=args.seed)
    print(f"generated a community graph: {ds.graph.total_nodes:,} nodes, {ds.graph.total_edges:,} edges, "
          f"{ds.num_classes} classes ({time.perf_counter() - start:.1f} s)")
    start = time.perf_counter()
    partition_graph(ds.graph, "demo", 2, out, part_method="metis", balance_ntypes=dataset_balance(ds, "train"),
                    overwrite=args.overwrite)
    print(f"partitioned into 2 parts with METIS ({time.perf_counter() - start:.1f} s) -> {out / 'demo.json'}")
    print(format_stats(partitioning_stats(out / "demo.json", verify=True)))
    print("training GraphSAGE on 2 local processes ...")
    m = train(options(args, str(out / "demo.json")), num_procs=2, host=args.host)
    print_metrics(m)


def _model_flags(p: argparse.ArgumentParser, epochs: int) -> None:
    p.add_argument("--task", default="node", choices=["node", "link"],
                   help="node classification, or link prediction (held-out edges ranked by MRR/AUC)")
    p.add_argument("--model", default="sage", choices=["sage", "mlp"],
                   help="sage: GraphSAGE (heterogeneous graphs: one SAGEConv per edge type, summed); "
                        "mlp: features-only baseline")
    p.add_argument("--fanouts", type=int_list, default="10,10",
                   help="neighbours sampled per layer, comma-separated (-1: all); one value per layer")
    p.add_argument("--batch-size", type=positive_int, default=1024,
                   help="global mini-batch size, seed nodes or positive edges (split across ranks)")
    p.add_argument("--hidden", type=positive_int, default=64, help="hidden width")
    p.add_argument("--dropout", type=float, default=0.5, help="dropout probability")
    p.add_argument("--epochs", type=positive_int, default=epochs, help="training epochs")
    p.add_argument("--lr", type=positive_float, default=0.01, help="learning rate (Adam)")
    p.add_argument("--weight-decay", type=non_negative_float, default=0.0, help="L2 penalty on the weights (Adam)")
    p.add_argument("--lr-schedule", default="constant", choices=["constant", "cosine", "step"],
                   help="learning rate over the epochs: constant; cosine from --lr towards 0 over --epochs; "
                        "step: x --lr-gamma every --lr-step epochs")
    p.add_argument("--lr-step", type=positive_int, default=10, help="step schedule: epochs between decays")
    p.add_argument("--lr-gamma", type=fraction, default=0.5, help="step schedule: factor per decay, in (0, 1]")
    p.add_argument("--num-workers", type=non_negative_int, default=0, help="sampler worker processes per rank")
    cache = p.add_mutually_exclusive_group()
    cache.add_argument("--cache-ratio", type=non_negative_float, default=0.0, metavar="ALPHA",
                       help="cache the features of the remote nodes each rank's batches read most, ALPHA x the "
                            "partition's own nodes in rows (0: no cache)")
    cache.add_argument("--cache-mb", type=non_negative_float, default=0.0, metavar="MB",
                       help="the same cache, sized in megabytes per rank")
    seed_flag(p)
    p.add_argument("--target", help="node type to classify (default: the only node type with labels)")
    p.add_argument("--embed-dim", type=non_negative_int, default=0,
                   help="width of the learnt inputs of node types without features (0: --hidden)")
    p.add_argument("--sparse-lr", type=positive_float, default=0.05,
                   help="learning rate of those inputs (sparse Adagrad)")


def _task_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--decoder", default="dot", choices=["dot", "mlp"], help="link: how a node pair is scored")
    p.add_argument("--neg-ratio", type=positive_float, default=1.0, help="link: random negative edges per positive")
    p.add_argument("--eval-negatives", type=positive_int, default=100,
                   help="link: random destinations each held-out edge is ranked against")
    p.add_argument("--edge-type", help="link, with --dataset: the edge type to predict, src:rel:dst (needed when "
                   "the graph has several)")
    p.add_argument("--link-split", help="link, with --part-config: the held-out edges file (safetensors)")
    p.add_argument("--eval-every", type=non_negative_int, default=1,
                   help="validate after every n-th epoch (0: after the last only)")
    p.add_argument("--eval-fanouts", type=int_list, help="neighbours sampled per layer when evaluating (default: all)")
    p.add_argument("--metrics-out", help="write per-epoch metrics and final accuracy/MRR/AUC to this JSON file")
    p.add_argument("--save-embeddings",
                   help="write the model's output for every node in original ID order: a .npy file, or for a "
                        "heterogeneous graph a directory of <node type>.npy (the types the task trains)")
    p.add_argument("--checkpoint", help="directory for checkpoints; an interrupted run resumes from it")
    p.add_argument("--num-classes", type=positive_int, help="node: number of label classes (default: the dataset's "
                   "num_classes, else the largest label in the splits + 1); a split label outside them is an error")
    p.add_argument("--allow-nonfinite", action="store_true",
                   help="train on NaN or infinite features and losses instead of stopping with an error")


def register(sub: Any) -> None:
    tr = command(sub, "train", "train a GNN on a partitioned graph (or a dataset, partitioned first)",
                 "Train a GNN with DDP across processes: node classification or link prediction, homogeneous or "
                 "heterogeneous graphs. With --num-procs N, start N local ranks (one partition each); without it, "
                 "run as one rank of a torchrun job. With --dataset and --task link, validation/test edges are held "
                 "out before partitioning.")
    tr.add_argument("--part-config", help="partition config JSON (from 'partition' or 'dispatch')")
    dataset_flag(tr, "dataset directory (meta.json) or chunked graph, partitioned into --work-dir first",
                 required=False)
    tr.add_argument("--work-dir", default="out/train", help="where --dataset is partitioned")
    method_flag(tr, "how --dataset is partitioned")
    cluster_flags(tr, "start this many local ranks (omit under torchrun)")
    _model_flags(tr, epochs=10)
    _task_flags(tr)
    tr.set_defaults(func=run_train)

    demo = command(sub, "demo", "the main job: generate, partition (METIS, 2 parts), train on 2 processes")
    demo.add_argument("--out", default="out/demo", help="output directory")
    demo.add_argument("--nodes", type=positive_int, default=20000, help="nodes of the generated graph")
    demo.add_argument("--noise", type=float, default=8.0,
                      help="feature noise of the generated graph (higher: features say less, structure more)")
    cluster_flags(demo, None)
    overwrite_flag(demo)
    _model_flags(demo, epochs=5)
    _task_flags(demo)
    demo.set_defaults(func=run_demo)

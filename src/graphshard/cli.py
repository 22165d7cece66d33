"""The ``graphshard`` command line."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

from .errors import GraphshardError

log = logging.getLogger("graphshard")


def _generate(args: argparse.Namespace) -> None:
    from .datasets import community_graph, hetero_graph, rmat_graph, save_dataset

    from .format.outputs import check_output_dir

    check_output_dir(args.out, "dataset", args.overwrite)  # refuse before generating
    start = time.perf_counter()
    if args.kind == "rmat":
        ds = rmat_graph(args.scale, args.edge_factor, args.feat_dim, args.seed)
    elif args.kind == "community":
        ds = community_graph(args.nodes, args.classes, args.avg_degree, args.intra, args.feat_dim, args.noise, args.seed)
    else:
        ds = hetero_graph(args.papers, args.authors, args.institutions, args.fields, args.classes, args.feat_dim,
                          args.noise, args.seed)
    out = save_dataset(ds, args.out, {"generator": vars(args) | {"func": None}}, overwrite=args.overwrite)
    print(f"generated {args.kind}: {ds.graph.total_nodes:,} nodes, {ds.graph.total_edges:,} edges "
          f"in {time.perf_counter() - start:.1f} s -> {out}")


def balance_vector(ds, spec: str | None) -> np.ndarray | None:
    """``--balance-ntypes`` value: ``train`` (node type × training flag) or a .npy file of per-node integers."""
    if spec is None:
        return None
    g = ds.graph
    if spec != "train":
        return np.load(spec, allow_pickle=False)
    parts = []
    for i, t in enumerate(g.ntypes):
        train = g.node_feats.get(t, {}).get("train_mask")
        flag = np.zeros(g.num_nodes[t], np.int64) if train is None else np.asarray(train, dtype=np.int64)
        parts.append(2 * i + flag)
    return np.concatenate(parts)


def _partition(args: argparse.Namespace) -> None:
    from .datasets import load_dataset
    from .partition.api import partition_graph
    from .stats import format_stats, partitioning_stats

    ds = load_dataset(args.dataset)
    name = args.graph_name or "".join(c if c.isalnum() else "_" for c in ds.name)
    start = time.perf_counter()
    partition_graph(ds.graph, name, args.num_parts, args.out, num_hops=args.num_hops, part_method=args.method,
                    balance_ntypes=balance_vector(ds, args.balance_ntypes), balance_edges=args.balance_edges,
                    num_trainers_per_machine=args.trainers_per_machine, objtype=args.objtype, seed=args.seed,
                    save_orig_ids=args.save_orig_ids, overwrite=args.overwrite)
    print(f"partitioned in {time.perf_counter() - start:.1f} s -> {Path(args.out) / (name + '.json')}")
    print(format_stats(partitioning_stats(Path(args.out) / f"{name}.json")))


def _inspect(args: argparse.Namespace) -> None:
    from .stats import format_stats, partitioning_stats

    st = partitioning_stats(args.config, verify=args.verify)
    print(json.dumps(st.to_dict(), indent=1) if args.json else format_stats(st))


def _chunk(args: argparse.Namespace) -> None:
    from .chunked.writer import chunk_graph
    from .datasets import load_dataset

    ds = load_dataset(args.dataset)
    name = args.graph_name or "".join(c if c.isalnum() else "_" for c in ds.name)
    meta = chunk_graph(ds.graph, args.out, args.num_chunks, args.format, name, args.feat_num_chunks,
                       overwrite=args.overwrite)
    print(f"wrote chunked graph {name!r} ({args.format}, {args.num_chunks} chunks) -> {meta.path}")


def _assign(args: argparse.Namespace) -> None:
    from .pipeline.assign import assign_chunked

    bal = np.load(args.balance_ntypes, allow_pickle=False) if args.balance_ntypes else None
    path = assign_chunked(args.in_dir, args.out_dir, args.num_parts, args.method, args.format, args.seed, bal,
                          args.balance_edges, overwrite=args.overwrite)
    print(f"wrote {args.method} assignment into {args.num_parts} parts -> {path.parent}")


def _dispatch(args: argparse.Namespace) -> None:
    from .pipeline.dispatch import DispatchOptions, run_dispatch

    opts = DispatchOptions(Path(args.in_dir), Path(args.partitions_dir), Path(args.out_dir), args.num_hops,
                           args.save_orig_nids, args.save_orig_eids, overwrite=args.overwrite)
    start = time.perf_counter()
    path = run_dispatch(opts, args.num_procs, args.timeout, args.host)
    if args.num_procs is not None or int(os.environ.get("RANK", "0")) == 0:  # one line, not one per rank
        print(f"dispatched in {time.perf_counter() - start:.1f} s -> {path}")


def _parmetis(args: argparse.Namespace) -> None:
    from .pipeline.parmetis import export_parmetis, import_parmetis

    if args.action == "export":
        for path in export_parmetis(args.in_dir, args.out_dir, overwrite=args.overwrite):
            print(f"wrote {path}")
    else:
        path = import_parmetis(args.in_dir, args.parmetis_dir, args.out_dir, args.num_parts, args.format,
                               overwrite=args.overwrite)
        print(f"wrote assignment files -> {path.parent}")


def _launch(args: argparse.Namespace) -> None:
    from .distributed.launcher import launch, run_script

    if not Path(args.script).is_file():
        raise FileNotFoundError(f"{args.script}: no such script")
    launch(run_script, args.num_procs, (str(args.script), list(args.script_args)), args.host, args.timeout)


def _options(args: argparse.Namespace, part_config: str = "") -> "TrainOptions":  # noqa: F821
    from .train import TrainOptions

    return TrainOptions(part_config=part_config, task=args.task, model=args.model,
                        fanouts=[int(f) for f in args.fanouts.split(",")], batch_size=args.batch_size,
                        hidden=args.hidden, num_layers=len(args.fanouts.split(",")), dropout=args.dropout,
                        epochs=args.epochs, lr=args.lr, num_workers=args.num_workers, seed=args.seed,
                        target=args.target, embed_dim=args.embed_dim, sparse_lr=args.sparse_lr, decoder=args.decoder,
                        neg_ratio=args.neg_ratio, eval_negatives=args.eval_negatives, link_split=args.link_split,
                        eval_every=args.eval_every, edge_type=args.edge_type,
                        eval_fanouts=[int(f) for f in args.eval_fanouts.split(",")] if args.eval_fanouts else None,
                        metrics_out=args.metrics_out, save_embeddings=args.save_embeddings,
                        checkpoint=args.checkpoint, timeout=args.timeout, num_classes=args.num_classes,
                        allow_nonfinite=args.allow_nonfinite)


def _print_metrics(m: dict, seconds: float) -> None:
    link = m.get("task") == "link"
    for e in m["epochs"]:
        if "val_mrr" in e or "val_acc" in e:
            score = f"val MRR {e['val_mrr']:.4f}  AUC {e['val_auc']:.4f}" if link else f"val acc {e['val_acc']:.4f}"
        else:
            score = ""
        print(f"epoch {e['epoch']:>3}: {e['wall_s']:.2f} s  loss {e['train_loss']:.4f}  {score}")
    keys = ("wall_s", "sample_s", "fetch_s", "compute_s", "comm_s", "fetch_bytes")
    total = {k: sum(e[k] for e in m["epochs"]) for k in keys}
    other = max(0.0, total["wall_s"] - sum(total[k] for k in keys[1:5]))
    where = f"on {m['world_size']} processes x {m['num_parts']} partitions"
    if link:
        print(f"test MRR {m['test_mrr']:.4f} (random scores: {m['random_mrr']:.4f}), AUC {m['test_auc']:.4f} {where}")
    else:
        print(f"test accuracy {m['test_acc']:.4f} (val {m['val_acc']:.4f}) {where}")
    print(f"time: {seconds:.1f} s end to end; training epochs {total['wall_s']:.1f} s = sampling "
          f"{total['sample_s']:.1f} + feature fetch {total['fetch_s']:.1f} + compute {total['compute_s']:.1f} "
          f"+ gradient sync {total['comm_s']:.1f} + other {other:.1f}; "
          f"{total['fetch_bytes'] / 1e6:.1f} MB of features fetched from other ranks")


def _train(args: argparse.Namespace) -> None:
    from .train import train

    if bool(args.part_config) == bool(args.dataset):
        raise FileNotFoundError("give exactly one of --part-config or --dataset")
    start = time.perf_counter()
    m = train(_options(args, args.part_config or ""), args.num_procs, args.dataset, args.work_dir, args.method, args.host)
    if int(os.environ.get("RANK", "0")) == 0:
        _print_metrics(m, time.perf_counter() - start)


def _demo(args: argparse.Namespace) -> None:
    from .datasets import community_graph
    from .partition.api import partition_graph
    from .stats import format_stats, partitioning_stats
    from .train import train

    out = Path(args.out)
    start = time.perf_counter()
    ds = community_graph(num_nodes=args.nodes, noise=args.noise, seed=args.seed)
    print(f"generated a community graph: {ds.graph.total_nodes:,} nodes, {ds.graph.total_edges:,} edges, "
          f"{ds.num_classes} classes ({time.perf_counter() - start:.1f} s)")
    start = time.perf_counter()
    partition_graph(ds.graph, "demo", 2, out, part_method="metis", balance_ntypes=balance_vector(ds, "train"))
    print(f"partitioned into 2 parts with METIS ({time.perf_counter() - start:.1f} s) -> {out / 'demo.json'}")
    print(format_stats(partitioning_stats(out / "demo.json", verify=True)))
    print("training GraphSAGE on 2 local processes ...")
    start = time.perf_counter()
    m = train(_options(args, str(out / "demo.json")), num_procs=2)
    _print_metrics(m, time.perf_counter() - start)


def _train_flags(p: argparse.ArgumentParser, epochs: int) -> None:
    p.add_argument("--task", default="node", choices=["node", "link"],
                   help="node classification, or link prediction (held-out edges ranked by MRR/AUC)")
    p.add_argument("--model", default="sage", choices=["sage", "mlp"],
                   help="sage: GraphSAGE (heterogeneous graphs: one SAGEConv per edge type, summed); "
                        "mlp: features-only baseline")
    p.add_argument("--fanouts", default="10,10", help="neighbours sampled per layer, comma-separated (-1 = all)")
    p.add_argument("--batch-size", type=int, default=1024,
                   help="global mini-batch size, seed nodes or positive edges (split across ranks)")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--epochs", type=int, default=epochs)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--num-workers", type=int, default=0, help="sampler worker processes per rank")
    p.add_argument("--seed", type=_seed, default=0)
    p.add_argument("--target", help="node type to classify (default: the only node type with labels)")
    p.add_argument("--embed-dim", type=int, default=0,
                   help="width of the learnt inputs of node types without features (default: --hidden)")
    p.add_argument("--sparse-lr", type=float, default=0.05, help="learning rate of those inputs (sparse Adagrad)")
    p.add_argument("--decoder", default="dot", choices=["dot", "mlp"], help="link: how a node pair is scored")
    p.add_argument("--neg-ratio", type=float, default=1.0, help="link: random negative edges per positive")
    p.add_argument("--eval-negatives", type=int, default=100,
                   help="link: random destinations each held-out edge is ranked against")
    p.add_argument("--edge-type", help="link, with --dataset: the edge type to predict, src:rel:dst (needed when "
                   "the graph has several)")
    p.add_argument("--link-split", help="link, with --part-config: the held-out edges file (safetensors)")
    p.add_argument("--eval-every", type=int, default=1, help="validate after every n-th epoch (0: after the last only)")
    p.add_argument("--eval-fanouts", help="neighbours sampled per layer when evaluating (default: all)")
    p.add_argument("--metrics-out", help="write per-epoch metrics and final accuracy/MRR/AUC to this JSON file")
    p.add_argument("--save-embeddings",
                   help="write the model's output for every node in original ID order: a .npy file, or for a "
                        "heterogeneous graph a directory of <node type>.npy (the types the task trains)")
    p.add_argument("--checkpoint", help="directory for checkpoints; an interrupted run resumes from it")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds any distributed wait may take")
    p.add_argument("--num-classes", type=int, help="node: number of label classes (default: the dataset's "
                   "num_classes, else the largest label in the splits + 1); a split label outside them is an error")
    p.add_argument("--allow-nonfinite", action="store_true",
                   help="train on NaN or infinite features and losses instead of stopping with an error")


HOST_HELP = ("address every socket of the run listens on (default 127.0.0.1: this machine only). The transport "
             "has no authentication (torch RPC unpickles requests): give another address only on a trusted network")


def _seed(text: str) -> int:
    """``--seed``: a non-negative integer (argparse reports anything else as a usage error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seed must be a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"seed must be a non-negative integer, got {value}")
    return value


def _overwrite_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--overwrite", action="store_true",
                   help="write into an output directory graphshard did not create (or that holds another graph's "
                        "or another kind of output): what graphshard writes replaces entries of the same name, "
                        "other files are kept; without it such a directory is refused")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="graphshard", description="Partition graphs for distributed GNN training.")
    p.add_argument("-v", "--verbose", action="store_true", help="log each phase (time, peak memory)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    gen = sub.add_parser("generate", help="write a synthetic dataset in the shared-data layout")
    gsub = gen.add_subparsers(dest="kind", required=True, metavar="KIND")
    r = gsub.add_parser("rmat", help="R-MAT power-law graph (Graph500 parameters), symmetrised")
    r.add_argument("--scale", type=int, required=True, help="2**SCALE nodes")
    r.add_argument("--edge-factor", type=int, default=16, help="sampled edges per node (default 16)")
    r.add_argument("--feat-dim", type=int, default=0, help="node feature dimension (default 0: none)")
    c = gsub.add_parser("community", help="planted-community graph with label signal in structure and features")
    c.add_argument("--nodes", type=int, default=20000)
    c.add_argument("--classes", type=int, default=8)
    c.add_argument("--avg-degree", type=int, default=16)
    c.add_argument("--intra", type=float, default=0.85, help="fraction of edges inside a community")
    c.add_argument("--feat-dim", type=int, default=32)
    c.add_argument("--noise", type=float, default=2.0, help="feature noise (higher = harder from features)")
    h = gsub.add_parser("hetero", help="MAG-like heterogeneous graph (paper/author/institution/field)")
    h.add_argument("--papers", type=int, default=20000)
    h.add_argument("--authors", type=int, default=8000)
    h.add_argument("--institutions", type=int, default=200)
    h.add_argument("--fields", type=int, default=50)
    h.add_argument("--classes", type=int, default=8)
    h.add_argument("--feat-dim", type=int, default=32)
    h.add_argument("--noise", type=float, default=2.0)
    for g in (r, c, h):
        g.add_argument("--seed", type=_seed, default=0)
        g.add_argument("--out", required=True, help="output dataset directory")
        _overwrite_flag(g)
        g.set_defaults(func=_generate)

    part = sub.add_parser("partition", help="partition a dataset directory in memory (format v1)")
    part.add_argument("--dataset", required=True, help="dataset directory in the shared-data layout")
    part.add_argument("--num-parts", type=int, required=True)
    part.add_argument("--out", required=True, help="output directory")
    part.add_argument("--graph-name", help="name of the partitioned graph (default: the dataset's name)")
    part.add_argument("--method", default="metis", choices=["metis", "random", "kaminpar"])
    part.add_argument("--num-hops", type=int, default=1, help="HALO depth (default 1)")
    part.add_argument("--balance-ntypes", metavar="train|FILE",
                      help="'train': balance training nodes (per node type); or a .npy of per-node integers")
    part.add_argument("--balance-edges", action="store_true", help="balance in-degree across partitions (metis)")
    part.add_argument("--trainers-per-machine", type=int, default=1)
    part.add_argument("--objtype", default="cut", choices=["cut", "vol"], help="METIS objective")
    part.add_argument("--seed", type=_seed, default=0)
    part.add_argument("--save-orig-ids", action="store_true", help="also write orig_nids/orig_eids files")
    _overwrite_flag(part)
    part.set_defaults(func=_partition)

    ins = sub.add_parser("inspect", help="summarise a partitioned graph (sizes, edge cut, balance)")
    ins.add_argument("config", help="OUT/NAME.json written by partition")
    ins.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ins.add_argument("--verify", action="store_true", help="check every file's sha256 first")
    ins.set_defaults(func=_inspect)

    ch = sub.add_parser("chunk", help="write a dataset in the chunked graph format")
    ch.add_argument("--dataset", required=True, help="dataset directory in the shared-data layout")
    ch.add_argument("--out", required=True, help="output directory (metadata.json + chunks)")
    ch.add_argument("--num-chunks", type=int, required=True, help="edge chunks per edge type")
    ch.add_argument("--feat-num-chunks", type=int, help="chunks per node feature (default: --num-chunks)")
    ch.add_argument("--format", default="numpy", choices=["csv", "numpy", "parquet"])
    ch.add_argument("--graph-name", help="graph name (default: the dataset's name)")
    _overwrite_flag(ch)
    ch.set_defaults(func=_chunk)

    asg = sub.add_parser("assign", help="step 1: write partition assignment files for a chunked graph")
    asg.add_argument("--in-dir", required=True, help="chunked graph directory")
    asg.add_argument("--out-dir", required=True, help="where <ntype>.txt and partition_meta.json go")
    asg.add_argument("--num-parts", type=int, required=True)
    asg.add_argument("--method", default="random", choices=["random", "metis"])
    asg.add_argument("--format", default="txt", choices=["txt", "npy"])
    asg.add_argument("--balance-ntypes", metavar="FILE.npy", help="metis: per-node integers (homogeneous order)")
    asg.add_argument("--balance-edges", action="store_true", help="metis: balance in-degree too")
    asg.add_argument("--seed", type=_seed, default=0)
    _overwrite_flag(asg)
    asg.set_defaults(func=_assign)

    dsp = sub.add_parser("dispatch", help="step 2: build format-v1 partitions on W ranks (torch.distributed)")
    dsp.add_argument("--in-dir", required=True, help="chunked graph directory")
    dsp.add_argument("--partitions-dir", required=True, help="assignment files from 'assign' (or your own)")
    dsp.add_argument("--out-dir", required=True, help="output directory (each rank writes its partitions here)")
    dsp.add_argument("--num-hops", type=int, default=1)
    dsp.add_argument("--save-orig-nids", action="store_true")
    dsp.add_argument("--save-orig-eids", action="store_true")
    dsp.add_argument("--num-procs", type=int, help="start this many local ranks (omit under torchrun)")
    dsp.add_argument("--timeout", type=float, default=300.0, help="seconds any collective may wait (default 300)")
    dsp.add_argument("--host", default="127.0.0.1", help=HOST_HELP)
    _overwrite_flag(dsp)
    dsp.set_defaults(func=_dispatch)

    pm = sub.add_parser("parmetis", help="ParMETIS (pm_dglpart) interoperability")
    pmsub = pm.add_subparsers(dest="action", required=True, metavar="ACTION")
    ex = pmsub.add_parser("export", help="write <name>_nodes.txt, _edges.txt, _stats.txt from a chunked graph")
    ex.add_argument("--in-dir", required=True)
    ex.add_argument("--out-dir", required=True)
    im = pmsub.add_parser("import", help="turn p<i>-<name>_nodes.txt outputs into assignment files")
    im.add_argument("--in-dir", required=True, help="the chunked graph that was exported")
    im.add_argument("--parmetis-dir", required=True, help="directory holding p<i>-<name>_nodes.txt")
    im.add_argument("--out-dir", required=True)
    im.add_argument("--num-parts", type=int)
    im.add_argument("--format", default="txt", choices=["txt", "npy"])
    for x in (ex, im):
        _overwrite_flag(x)
        x.set_defaults(func=_parmetis)

    lch = sub.add_parser("launch", help="run a script on N local ranks (torchrun-style environment, no set-up)",
                         description="Run SCRIPT in --num-procs processes on this machine. Each sees RANK, "
                         "WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT as under torchrun; the rendezvous "
                         "store binds to --host on a free port. If a rank fails the others are stopped and the "
                         "error names the rank at fault.")
    lch.add_argument("--num-procs", type=int, required=True, help="number of ranks")
    lch.add_argument("--timeout", type=float, default=300.0, help="seconds the rendezvous store waits (default 300)")
    lch.add_argument("--host", default="127.0.0.1", help=HOST_HELP)
    lch.add_argument("script", help="Python file to run on every rank")
    lch.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    lch.set_defaults(func=_launch)

    tr = sub.add_parser("train", help="train a GNN on a partitioned graph (or a dataset, partitioned first)",
                        description="Train a GNN with DDP across processes: node classification or link prediction, "
                        "homogeneous or heterogeneous graphs. With --num-procs N, start N local ranks (one partition "
                        "each); without it, run as one rank of a torchrun job. With --dataset and --task link, "
                        "validation/test edges are held out before partitioning.")
    tr.add_argument("--part-config", help="partition config JSON (from 'partition' or 'dispatch')")
    tr.add_argument("--dataset", help="dataset directory (shared-data layout), partitioned into --work-dir first")
    tr.add_argument("--work-dir", default="out/train", help="where --dataset is partitioned (default out/train)")
    tr.add_argument("--method", default="metis", choices=["random", "metis", "kaminpar"], help="for --dataset")
    tr.add_argument("--num-procs", type=int, help="start this many local ranks (omit under torchrun)")
    tr.add_argument("--host", default="127.0.0.1", help=HOST_HELP)
    _train_flags(tr, epochs=10)
    tr.set_defaults(func=_train)

    demo = sub.add_parser("demo", help="the main job: generate, partition (METIS, 2 parts), train on 2 processes")
    demo.add_argument("--out", default="out/demo", help="output directory (default out/demo)")
    demo.add_argument("--nodes", type=int, default=20000)
    demo.add_argument("--noise", type=float, default=8.0,
                      help="feature noise of the generated graph (higher: features say less, structure more)")
    _train_flags(demo, epochs=5)
    demo.set_defaults(func=_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        args.func(args)
    except (GraphshardError, OSError, RuntimeError) as exc:  # OSError names its path (permissions, ...)
        print(f"graphshard: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

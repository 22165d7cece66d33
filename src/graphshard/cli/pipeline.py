"""The out-of-core pipeline on chunked graphs: ``assign`` (step 1), ``dispatch`` (step 2) and ``parmetis``."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from .common import (
    balance_flags,
    cluster_flags,
    command,
    dataset_flag,
    disk_check_flag,
    method_flag,
    out_flag,
    overwrite_flag,
    positive_int,
    seed_flag,
)

CHUNKED_HELP = "input graph: a chunked graph directory (metadata.json; write one with 'graphshard chunk')"

FEAT_DTYPE_HELP = (
    "store floating-point node and edge features in this type (half the bytes of float32, rounded; recorded in "
    "the config's feat_dtype and feature_schema; training and embed upcast them to float32 at the model's input; "
    "CSR features keep theirs). Default: as given"
)


def run_assign(args: argparse.Namespace) -> None:
    from ..pipeline.assign import assign_chunked

    path = assign_chunked(
        args.dataset,
        args.out,
        args.num_parts,
        args.method,
        fmt=args.format,
        seed=args.seed,
        balance_ntypes=args.balance_ntypes,
        balance_edges=args.balance_edges,
        objtype=args.objtype,
        overwrite=args.overwrite,
        memory_mb=args.memory_mb,
        passes=args.passes,
        memory=args.memory,
        check_disk=args.check_disk,
    )
    print(f"wrote {args.method} assignment into {args.num_parts} parts -> {path.parent}")


def run_dispatch(args: argparse.Namespace) -> None:
    from ..memory import parse_size
    from ..pipeline.dispatch import DispatchOptions
    from ..pipeline.dispatch import run_dispatch as dispatch

    nids = args.save_orig_ids or args.save_orig_nids
    eids = args.save_orig_ids or args.save_orig_eids
    opts = DispatchOptions(
        Path(args.dataset),
        Path(args.assignment),
        Path(args.out),
        args.num_hops,
        save_orig_nids=nids,
        save_orig_eids=eids,
        overwrite=args.overwrite,
        memory=parse_size(args.memory) if args.memory else 0,
        feat_dtype=args.feat_dtype,
        check_disk=args.check_disk,
    )
    start = time.perf_counter()
    path = dispatch(opts, args.num_procs, args.timeout, args.host, heartbeat_timeout=args.heartbeat_timeout)
    if args.num_procs is not None or int(os.environ.get("RANK", "0")) == 0:  # one line, not one per rank
        print(f"dispatched in {time.perf_counter() - start:.1f} s -> {path}")


def dispatch_interrupted(args: argparse.Namespace) -> str:
    """What an interrupted ``dispatch`` says: the config is written last, and finished partitions are kept."""
    return (
        "interrupted before the partitions were published (no config was written); run the same command to "
        "resume: the partitions already written are reused"
    )


def run_parmetis(args: argparse.Namespace) -> None:
    from ..pipeline.parmetis import export_parmetis, import_parmetis

    if args.action == "export":
        for path in export_parmetis(args.dataset, args.out, overwrite=args.overwrite):
            print(f"wrote {path}")
    else:
        path = import_parmetis(
            args.dataset, args.parmetis_dir, args.out, args.num_parts, fmt=args.format, overwrite=args.overwrite
        )
        print(f"wrote assignment files -> {path.parent}")


def run_plan(args: argparse.Namespace) -> None:
    from ..memory import allowed
    from ..plan.report import plan_data, render

    budget = allowed(args.memory)
    data = plan_data(
        args.dataset,
        args.part_config,
        args.assignment,
        args.num_parts,
        procs=args.num_procs,
        budget=budget,
        memory_mb=args.memory_mb,
        hidden=args.hidden,
        sampled_eval=args.sampled_eval,
        out=args.out,
        num_hops=args.num_hops,
    )
    print(json.dumps(data, indent=1) if args.json else render(data))


def _plan(sub: Any) -> None:
    p = command(
        sub,
        "plan",
        "predict the peak memory and disk of assign, dispatch and train",
        "With --dataset (a chunked graph): the peak memory and peak disk of assign --method "
        "random/stream/kaminpar/metis, which fit --memory (default: this machine's) and the free disk, and a "
        "recommendation, and the peak of every dispatch rank (--num-procs ranks; partitions counted from "
        "--assignment, or assumed even) with the disk of the partitions; with a dataset directory, the same "
        "for graphshard partition. With --part-config: the peak of every training process. Memory is private "
        "(anonymous) memory; the partition files a process memory-maps are listed apart (page cache the "
        "kernel can drop). Disk is the peak a step has on disk at once, where it lands (--out) and the free "
        "space of that file system; every step refuses to start when it does not fit (--no-disk-check).",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--dataset",
        help="a chunked graph (metadata.json): plans of assign and dispatch; or a dataset "
        "directory (meta.json): the plan of graphshard partition, in memory",
    )
    src.add_argument("--part-config", help="partition config JSON: plan training on these partitions")
    p.add_argument("--num-parts", type=positive_int, default=4, help="number of partitions (assign, dispatch)")
    p.add_argument(
        "--assignment",
        help="assignment directory: count each partition's edges for the dispatch plan (one pass over the edges)",
    )
    p.add_argument("--num-procs", type=positive_int, default=2, help="dispatch ranks / training processes")
    p.add_argument("--memory", metavar="SIZE", help="memory budget, e.g. 16G (default: this machine's)")
    p.add_argument("--memory-mb", type=positive_int, default=1024, help="stream/kaminpar sort buffer (as assign)")
    p.add_argument("--hidden", type=positive_int, default=64, help="training: hidden width (as train)")
    p.add_argument(
        "--out",
        default=".",
        help="where the steps will write (their --out): disk is predicted there and compared with the free space "
        "of its file system",
    )
    p.add_argument("--num-hops", type=positive_int, default=1, help="dispatch, partition: HALO depth (as dispatch)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON (bytes) instead of tables")
    p.add_argument(
        "--sampled-eval",
        action="store_true",
        help="training: evaluation by sampled batches (train --eval-fanouts) instead of layer-wise inference",
    )
    p.set_defaults(func=run_plan)


def _assign(sub: Any) -> None:
    asg = command(sub, "assign", "step 1: write partition assignment files for a chunked graph")
    dataset_flag(asg, CHUNKED_HELP)
    out_flag(asg, "output directory (<ntype>.txt or .npy per node type + partition_meta.json)")
    asg.add_argument("--num-parts", type=positive_int, required=True, help="number of partitions")
    method_flag(
        asg,
        "metis reads the structure (never the features) into memory; stream (restreamed Fennel) and "
        "kaminpar build the adjacency out of core and never hold the edge list; random reads only counts",
    )
    asg.add_argument(
        "--memory-mb",
        type=positive_int,
        default=1024,
        help="stream/kaminpar: sort buffer of the out-of-core adjacency (its disk copy goes beside --out)",
    )
    asg.add_argument("--passes", type=positive_int, default=8, help="stream: passes over the adjacency (restreaming)")
    asg.add_argument(
        "--memory",
        metavar="SIZE",
        help="memory this step may use, e.g. 16G (default: the machine's); "
        "a method predicted to need more is refused before it starts (see 'graphshard plan')",
    )
    asg.add_argument("--format", default="txt", choices=["txt", "npy"], help="assignment file format")
    balance_flags(asg)
    seed_flag(asg)
    disk_check_flag(asg)
    overwrite_flag(asg)
    asg.set_defaults(func=run_assign)


def _dispatch(sub: Any) -> None:
    dsp = command(sub, "dispatch", "step 2: build format-v1 partitions on W ranks (torch.distributed)")
    dataset_flag(dsp, CHUNKED_HELP)
    dsp.add_argument(
        "--assignment",
        "--partitions-dir",
        dest="assignment",
        required=True,
        help="assignment directory (from 'assign', 'parmetis import' or your own)",
    )
    out_flag(dsp, "output directory (each rank writes its partitions here)")
    dsp.add_argument("--num-hops", type=positive_int, default=1, help="HALO depth")
    dsp.add_argument("--save-orig-ids", action="store_true", help="also write orig_nids/orig_eids files")
    dsp.add_argument("--save-orig-nids", action="store_true", help=argparse.SUPPRESS)
    dsp.add_argument("--save-orig-eids", action="store_true", help=argparse.SUPPRESS)
    dsp.add_argument("--feat-dtype", choices=["float16", "bfloat16"], help=FEAT_DTYPE_HELP)
    cluster_flags(dsp, "start this many local ranks (omit under torchrun)")
    dsp.add_argument(
        "--memory",
        metavar="SIZE",
        help="memory the ranks on one machine may use together, e.g. 16G "
        "(default: the machine's); a run predicted to need more is refused after counting the edges, "
        "before any data moves (see 'graphshard plan --assignment')",
    )
    disk_check_flag(dsp)
    overwrite_flag(dsp)
    dsp.set_defaults(func=run_dispatch, interrupted=dispatch_interrupted)


def _parmetis(sub: Any) -> None:
    pm = command(sub, "parmetis", "ParMETIS (pm_dglpart) interoperability")
    pmsub = pm.add_subparsers(dest="action", required=True, metavar="ACTION")
    ex = command(pmsub, "export", "write <name>_nodes.txt, _edges.txt, _stats.txt from a chunked graph")
    im = command(pmsub, "import", "turn ParMETIS's p<i>-<name>_nodes.txt outputs into assignment files")
    dataset_flag(ex, CHUNKED_HELP)
    out_flag(ex, "output directory for ParMETIS's input files")
    dataset_flag(im, "the chunked graph that was exported")
    im.add_argument("--parmetis-dir", required=True, help="directory holding p<i>-<name>_nodes.txt")
    out_flag(im, "output directory for the assignment files")
    im.add_argument("--num-parts", type=positive_int, help="number of partitions (default: as many as found)")
    im.add_argument("--format", default="txt", choices=["txt", "npy"], help="assignment file format")
    for x in (ex, im):
        overwrite_flag(x)
        x.set_defaults(func=run_parmetis)


def register(sub: Any) -> None:
    _assign(sub)
    _plan(sub)
    _dispatch(sub)
    _parmetis(sub)

"""``embed``: every node's output from a training checkpoint, without training."""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from .common import cluster_flags, command, device_flag, out_flag, partition_flags


def run_embed(args: argparse.Namespace) -> None:
    from ..train import embed

    args.out_before = _stamp(args.out)
    start = time.perf_counter()
    embed(
        args.part_config,
        args.checkpoint,
        args.out,
        args.num_procs,
        host=args.host,
        timeout=args.timeout,
        layer=args.embedding_layer,
        heartbeat_timeout=args.heartbeat_timeout,
        verify=args.verify,
        memory=args.memory,
        colocated=args.colocated,
        device=args.device,
    )
    print(f"wrote every node's output in {time.perf_counter() - start:.1f} s -> {args.out}")
    if args.id_map and os.environ.get("RANK", "0") == "0":  # under torchrun: rank 0 names the rows
        from ..prepare.idmap import name_outputs

        named = name_outputs(args.out, args.id_map)
        print(f"with the users' IDs (from {args.id_map}): {', '.join(map(str, named))}")


def interrupted_line(args: argparse.Namespace) -> str:
    """What an interrupted ``embed`` says (its output is written whole at the end, or not at all: a signal that
    arrives while it is put in place is raised once it is, and then the output is this run's, complete)."""
    if "out_before" in args and _stamp(args.out) not in (None, args.out_before):
        return f"interrupted after writing {args.out} (complete)"
    return f"interrupted; run the same command again to write {args.out}"


def _stamp(path: str) -> tuple[int, int] | None:
    """Which file (or directory) is at ``path`` now: its inode and change time, or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def register(sub: Any) -> None:
    p = command(
        sub,
        "embed",
        "write every node's output from a training checkpoint (layer-wise, exact)",
        "Rebuild the model a 'graphshard train --checkpoint DIR' run trained (from the options the "
        "checkpoint records), restore its weights and learnt inputs, and write every node's output in "
        "original ID order: a .npy file, or for a heterogeneous graph a directory of <node type>.npy. "
        "Runs on as many ranks as the training run had.",
    )
    p.add_argument("--part-config", required=True, help="partition config JSON the run trained on")
    p.add_argument(
        "--checkpoint",
        required=True,
        help="the run's --checkpoint directory (its last epoch), or DIR/best (the best validation epoch)",
    )
    p.add_argument(
        "--embedding-layer",
        default="output",
        choices=["output", "hidden"],
        help="the model's output, or the hidden layer the last layer reads",
    )
    partition_flags(p)
    device_flag(p)
    p.add_argument(
        "--memory",
        metavar="SIZE",
        help="memory the ranks started here may use together, e.g. 16G (default: the machine's); ranks predicted "
        "to need more (layer-wise inference: see 'graphshard plan --part-config') are refused before they start",
    )
    out_flag(p, "output .npy file (homogeneous) or directory (heterogeneous)")
    p.add_argument(
        "--id-map",
        metavar="PREPARED_DIR",
        help="a 'graphshard prepare --out' directory: also write the rows with the users' own IDs, as Parquet "
        "(columns id, embedding) beside the .npy output",
    )
    cluster_flags(p, "start this many local ranks: the training run's rank count (omit under torchrun)")
    p.set_defaults(func=run_embed, interrupted=interrupted_line)

"""``prepare``: users' tables (Parquet or CSV) into a chunked graph, on DuckDB or Spark."""

from __future__ import annotations

import argparse
from typing import Any

from .common import command, out_flag, overwrite_flag


def run_prepare(args: argparse.Namespace) -> None:
    from ..graph import etype_str
    from ..prepare import prepare

    done = prepare(
        args.config,
        args.out,
        engine=args.engine,
        master=args.master,
        on_dangling=args.on_dangling,
        memory=args.memory,
        spark_conf=dict(args.conf),
        overwrite=args.overwrite,
    )
    nodes = ", ".join(f"{n:,} {t}" for t, n in done.num_nodes.items())
    edges = ", ".join(f"{n:,} {etype_str(e)}" for e, n in done.num_edges.items())
    print(f"prepared {nodes} nodes; {edges} edges in {done.seconds:.1f} s -> {done.out}")
    for et, n in done.dropped.items():
        if n:
            print(f"dropped {n:,} {etype_str(et)} edges naming nodes their node tables lack")


def register(sub: Any) -> None:
    p = command(
        sub,
        "prepare",
        "turn node and edge tables (Parquet or CSV) into a chunked graph, with ID maps and fitted transforms",
        "Read the tables a YAML or JSON config names, map the users' node IDs to graphshard's, transform feature "
        "columns, write labels and train/val/test splits, and write the chunked graph format (which assign, "
        "dispatch, partition --dataset and train --dataset read), the ID maps (id_maps/<type>/, Parquet) and "
        "every fitted transform (transforms.json). See docs/guide/prepare.md for the config.",
    )
    p.add_argument("config", help="the prepare config (.yaml, .yml or .json)")
    out_flag(p, "output directory (the chunked graph)")
    p.add_argument(
        "--engine",
        choices=["local", "spark"],
        default="local",
        help="local: DuckDB in this process, out of core; spark: PySpark (--master)",
    )
    p.add_argument("--master", help="Spark's master URL (default local[*]; spark://HOST:7077 for a cluster)")
    p.add_argument(
        "--on-dangling",
        choices=["error", "drop"],
        default="error",
        help="edges naming a node their node table lacks: an error naming a sample, or dropped (counted, sampled)",
    )
    p.add_argument(
        "--memory",
        metavar="SIZE",
        help="the engine's memory, e.g. 3GB (local: DuckDB's limit, default 2.5GB; spark: driver and executor "
        "memory, default 2g)",
    )
    p.add_argument(
        "--conf",
        metavar="KEY=VALUE",
        type=_setting,
        action="append",
        default=[],
        help="a Spark setting, as spark-submit --conf takes it (repeatable; the spark engine only)",
    )
    overwrite_flag(p)
    p.set_defaults(func=run_prepare)


def _setting(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (e.g. spark.executor.cores=4), got {text!r}")
    return key.strip(), value

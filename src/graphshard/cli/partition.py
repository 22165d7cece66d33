"""In-memory partitioning: ``partition`` (a dataset into format-v1 partitions) and ``inspect`` (a summary)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from .common import (
    balance_flags,
    command,
    dataset_flag,
    disk_check_flag,
    method_flag,
    out_flag,
    overwrite_flag,
    positive_int,
    seed_flag,
)

FEAT_DTYPE_HELP = (
    "store floating-point node and edge features in this type (half the bytes of float32, rounded; recorded in "
    "the config's feat_dtype and feature_schema; training and embed upcast them to float32 at the model's input; "
    "CSR features keep theirs). Default: as given"
)


def dataset_balance(ds: Any, spec: str | None) -> np.ndarray | None:
    """``--balance-ntypes`` for a dataset held in memory."""
    from ..partition.balance import option_classes

    g = ds.graph
    return option_classes(spec, g.ntypes, g.num_nodes, lambda t: g.node_feats.get(t, {}).get("train_mask"))


def run_partition(args: argparse.Namespace) -> None:
    from ..datasets import load_dataset
    from ..memory import allowed
    from ..partition.api import partition_graph
    from ..partition.cost import check_partition_disk, check_partition_fits
    from ..stats import format_stats, partitioning_stats

    budget = allowed(args.memory)
    check_partition_fits(args.dataset, args.method, args.num_parts, budget)  # from the counts, before reading
    check_partition_disk(
        args.dataset,
        args.out,
        args.num_parts,
        args.num_hops,
        orig_ids=args.save_orig_ids,
        trainers=args.trainers_per_machine,
        check=args.check_disk,
    )
    ds = load_dataset(args.dataset)
    name = args.graph_name or "".join(c if c.isalnum() else "_" for c in ds.name)
    start = time.perf_counter()
    partition_graph(
        ds.graph,
        name,
        args.num_parts,
        args.out,
        num_hops=args.num_hops,
        part_method=args.method,
        balance_ntypes=dataset_balance(ds, args.balance_ntypes),
        balance_edges=args.balance_edges,
        num_trainers_per_machine=args.trainers_per_machine,
        objtype=args.objtype,
        seed=args.seed,
        save_orig_ids=args.save_orig_ids,
        overwrite=args.overwrite,
        num_classes=_declared_classes(ds.num_classes, args.dataset),
        memory=budget,
        feat_dtype=args.feat_dtype,
        check_disk=args.check_disk,
    )
    print(f"partitioned in {time.perf_counter() - start:.1f} s -> {Path(args.out) / (name + '.json')}")
    print(format_stats(partitioning_stats(Path(args.out) / f"{name}.json")))


def _declared_classes(value: Any, dataset: str) -> int | None:
    """A dataset's ``num_classes`` (recorded in the partition config), refused when not a positive integer."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value
    raise InputError(f"{Path(dataset) / 'meta.json'}: num_classes must be a positive integer, got {value!r}")


def run_inspect(args: argparse.Namespace) -> None:
    from ..format.config import read_config
    from ..stats import format_stats, partitioning_stats

    config = _config_of(Path(args.config))
    st = partitioning_stats(config, verify=args.verify)
    checked = read_config(config).checksums if args.verify else {}
    if args.json:
        print(json.dumps(st.to_dict() | ({"checksums_verified": len(checked)} if args.verify else {}), indent=1))
    else:
        print(format_stats(st))
        if args.verify:
            size = sum((config.parent / rel).stat().st_size for rel in checked)
            print(f"verified: {len(checked)} files ({size / 1e6:,.1f} MB) match the sha256 in {config.name}")
    if args.plot:
        from ..plot import plot_partitions

        print(f"wrote {plot_partitions(config, Path(args.plot))}")


def _config_of(path: Path) -> Path:
    """The partition config ``inspect`` was given; a directory is refused naming the config(s) inside it."""
    if not path.is_dir():
        return path
    inside = sorted(p.name for p in path.glob("*.json")) if (path / "part0").is_dir() else []
    if not inside:
        raise InputError(f"{path} is a directory with no partition config (NAME.json) in it")
    raise InputError(
        f"{path} is a directory; give its partition config: "
        + " or ".join(f"graphshard inspect {path / name}" for name in inside)
    )


def register(sub: Any) -> None:
    part = command(sub, "partition", "partition a dataset in memory into format-v1 partitions")
    dataset_flag(part, "input graph: a dataset directory (meta.json) or a chunked graph (metadata.json)")
    part.add_argument("--num-parts", type=positive_int, required=True, help="number of partitions")
    out_flag(part, "output directory (NAME.json + part<i>/)")
    part.add_argument("--graph-name", help="name of the partitioned graph (default: the dataset's name)")
    method_flag(part)
    part.add_argument("--num-hops", type=positive_int, default=1, help="HALO depth")
    balance_flags(part)
    part.add_argument(
        "--trainers-per-machine",
        type=positive_int,
        default=1,
        help="split each partition's nodes among this many trainers (stored as <ntype>/trainer_id)",
    )
    seed_flag(part)
    part.add_argument("--save-orig-ids", action="store_true", help="also write orig_nids/orig_eids files")
    part.add_argument("--feat-dtype", choices=["float16", "bfloat16"], help=FEAT_DTYPE_HELP)
    part.add_argument(
        "--memory",
        metavar="SIZE",
        help="memory this step may use, e.g. 16G (default: the machine's); "
        "a method predicted to need more is refused before the dataset is read (see 'graphshard plan')",
    )
    disk_check_flag(part)
    overwrite_flag(part)
    part.set_defaults(func=run_partition)

    ins = command(sub, "inspect", "summarise a partitioned graph (sizes, edge cut, balance)")
    ins.add_argument("config", help="partition config NAME.json (from partition or dispatch)")
    ins.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ins.add_argument("--verify", action="store_true", help="check every file's sha256 first")
    ins.add_argument(
        "--plot",
        metavar="FILE.png",
        help="also draw the partitions: inner/HALO sizes, the cut matrix, degrees of cut vs kept edges",
    )
    ins.set_defaults(func=run_inspect)

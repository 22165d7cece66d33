"""Training commands: ``train`` (on partitions or a dataset) and ``demo`` (the main job on a generated graph)."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from .common import command, overwrite_flag, positive_int, security_flags


class _Given(argparse.Action):
    """Stores the value and records that the flag was given (so it overrides the config file)."""

    def __call__(self, parser, namespace, values, option_string=None):  # argparse's signature
        setattr(namespace, self.dest, values)
        namespace.given = namespace.given | {self.dest}


class _GivenBool(argparse.BooleanOptionalAction):
    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        namespace.given = namespace.given | {self.dest}


def _flag_type(spec: Any) -> Any:
    from ..tasks.fields import coerce

    def parse(text: str) -> Any:
        try:
            return coerce(spec, text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def option_flags(p: argparse.ArgumentParser, names: list[str], defaults: dict[str, Any] | None = None) -> None:
    """One flag per option in ``names``, typed, checked and documented by its spec (see
    :mod:`graphshard.tasks.options`); the flags given are recorded in ``args.given``."""
    from ..train.config_file import option_defaults, option_specs

    specs, values = option_specs(), option_defaults() | (defaults or {})
    p.set_defaults(given=frozenset())
    for name in names:
        spec, flags = specs[name], [f"--{name.replace('_', '-')}"] + (["--in-dir"] if name == "dataset" else [])
        if spec.kind == "bool":
            p.add_argument(*flags, dest=name, action=_GivenBool, default=values[name], help=spec.help)
            continue
        metavar = spec.metavar or ("{" + ",".join(spec.choices) + "}" if spec.choices else None)
        p.add_argument(
            *flags,
            dest=name,
            action=_Given,
            type=_flag_type(spec),
            default=values[name],
            choices=spec.choices,
            metavar=metavar,
            help=spec.help,
        )


def options(args: argparse.Namespace, **fixed: Any) -> Any:
    """The checked ``(TrainOptions, LaunchOptions)`` of a command line: the options of ``--config`` (if
    any), overridden by the flags given, then by ``fixed``; the others at their defaults (as the flags
    show them)."""
    from ..train.config_file import build_options, option_specs, read_config_file

    values = read_config_file(args.config) if getattr(args, "config", None) else {}
    values |= {k: getattr(args, k) for k in args.given}
    defaults = {k: v for k, v in vars(args).items() if k in option_specs() and k not in values}
    return build_options(defaults | values | fixed)


def _shown(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.4f}"


def node_result(m: dict[str, Any], at: str, where: str) -> str:
    """``test accuracy 0.9840 (val 0.9830) at epoch 3 (best validation), on ...`` for the metric that selected
    the epoch, and a line of the other metrics."""
    tests = m.get("test_metrics") or {"accuracy": m["test_acc"]}
    vals = m.get("val_metrics") or {"accuracy": m["val_acc"]}
    first, *rest = list(tests)
    line = f"test {first} {_shown(tests[first])} (val {_shown(vals.get(first))}) at {at}, {where}"
    if rest:
        line += "\n  also: " + ", ".join(f"{k} {_shown(tests[k])} (val {_shown(vals.get(k))})" for k in rest)
    return line


def print_metrics(m: dict, epochs: bool = False) -> None:
    """The test result and where the time went (and the per-epoch lines with ``epochs``: rank 0 prints
    them as the epochs end)."""
    from ..tasks.report import epoch_line, hits_text
    from ..tasks.timing import describe

    link = m.get("task") == "link"
    for e in m["epochs"] if epochs else []:
        print(epoch_line(e))
    keys = (
        "wall_s",
        "wait_s",
        "sample_s",
        "fetch_s",
        "copy_s",
        "compute_s",
        "comm_s",
        "fetch_bytes",
        "colocated_rows",
        "cache_hits",
        "cache_misses",
        "copy_bytes",
        "device_cache_hits",
        "device_cache_asked",
    )
    first = m.get("start_epoch", 0)  # > 0: resumed; the epochs before came from the checkpoint
    ran = [e for e in m["epochs"] if e["epoch"] >= first]  # this run's: what its time account covers
    total = {k: sum(e.get(k, 0) for e in ran) for k in keys}
    # the same figure as the time account's "training epochs" (its phase holds the epochs and what lies between
    # them), so that one run does not show two; what the parts do not cover is "other"
    total["wall_s"] = m.get("time", {}).get("epochs_s", total["wall_s"])
    other = max(0.0, total["wall_s"] - total["wait_s"] - total["copy_s"] - total["compute_s"] - total["comm_s"])
    where = f"on {m['world_size']} processes x {m['num_parts']} partitions"
    at = f"epoch {m['best_epoch']} (best validation)" if "best_epoch" in m else "the last epoch"
    if link:
        print(
            f"test MRR {m['test_mrr']:.4f} (random scores: {m['random_mrr']:.4f}), AUC {m['test_auc']:.4f}"
            f"{hits_text(m, 'test_')} at {at}, {where}"
        )
    elif m.get("task") == "multi":
        print(f"test figures at {at}, {where} (main task {m['main_task']}):")
        for name, figures in m["test_metrics"].items():
            vals = m["val_metrics"][name]
            print(f"  {name}: " + ", ".join(f"{k} {_shown(v)} (val {_shown(vals.get(k))})" for k, v in figures.items()))
    else:
        print(node_result(m, at, where))
    if "last_epoch" in m:
        last = m["last_epoch"]
        figures = ", ".join(f"{k.replace('_', ' ')} {v:.4f}" for k, v in last.items() if k != "epoch")
        print(f"  last epoch {last['epoch']}: {figures}")
    if m["epochs"] and m["epochs"][-1].get("stopped_early"):
        print(f"  stopped early after epoch {m['epochs'][-1]['epoch']} (--patience)")
    print(f"time: {describe(m['time'])}")
    cache = ""
    if "cache_rows" in m and m.get("cache_device", "host") == "host":
        asked = total["cache_hits"] + total["cache_misses"]
        cache = (
            f"; feature cache {m['cache_rows']:,} rows ({m['cache_bytes'] / 1e6:.1f} MB, built in "
            f"{m['cache_build_s']:.1f} s) served {total['cache_hits'] / max(1, asked):.0%} of remote rows"
        )
    elif "cache_rows" in m:
        held = total["device_cache_hits"] / max(1, total["device_cache_asked"])
        cache = (
            f"; device feature cache {m['cache_rows']:,} rows ({m['cache_bytes'] / 1e6:.1f} MB on "
            f"{m['cache_device']}, built in {m['cache_build_s']:.1f} s) held {held:.0%} of the rows batches read"
        )
    copy = ""
    if total["copy_bytes"]:
        copy = f" + copy to the device {total['copy_s']:.1f} ({total['copy_bytes'] / 1e6:.0f} MB)"
    if any(e.get("background") for e in ran):
        batches = (
            f"waiting for batches {total['wait_s']:.1f} (built in the background: sampling "
            f"{total['sample_s']:.1f} + feature fetch {total['fetch_s']:.1f})"
        )
    else:
        batches = f"sampling {total['sample_s']:.1f} + feature fetch {total['fetch_s']:.1f}"
    print(
        f"{_trained(ran, first)} {total['wall_s']:.1f} s = {batches}{copy} + compute {total['compute_s']:.1f} + "
        f"gradient sync {total['comm_s']:.1f} + other {other:.1f}; {total['fetch_bytes'] / 1e6:.1f} MB of features "
        f"fetched from other ranks{_colocated(total['colocated_rows'])}{cache}"
    )


def _colocated(rows: float) -> str:
    """What the summary says of the rows read in-process from co-located partitions (nothing if none)."""
    return f", {rows / 1e6:.1f} M rows read in-process from co-located partitions" if rows else ""


def _trained(ran: list[dict], first: int) -> str:
    """``training epochs``; after a resume, which epochs this run trained and which it resumed."""
    if not first:
        return "training epochs"
    before = "epoch 0" if first == 1 else f"epochs 0-{first - 1}"
    if not ran:
        return f"training epochs (none in this run: {before} resumed from the checkpoint)"
    span = f"{ran[0]['epoch']}-{ran[-1]['epoch']}" if len(ran) > 1 else f"{ran[0]['epoch']}"
    return f"training epoch{'s' if len(ran) > 1 else ''} {span} (this run; {before} resumed from the checkpoint)"


def run_train(args: argparse.Namespace) -> None:
    from ..errors import InputError
    from ..train import train
    from ..train.config_file import dump_config

    opts, launch = options(args, print_epochs=True)
    if args.print_config:
        print(dump_config(opts, launch), end="")
        return
    if bool(opts.part_config) == bool(launch.dataset):
        raise InputError("give exactly one of --part-config or --dataset (on the command line or in --config)")
    from ..memory import parse_size

    m = train(
        opts,
        launch.num_procs,
        launch.dataset,
        launch.work_dir,
        part_method=launch.method,
        host=launch.host,
        memory=parse_size(launch.memory) if launch.memory else 0,
    )
    if int(os.environ.get("RANK", "0")) == 0:
        print_metrics(m)


def interrupted_line(args: argparse.Namespace) -> str:
    """What an interrupted ``train`` says: the epoch the same command resumes after, or that nothing was kept."""
    from ..tasks.checkpoint import read_state

    opts, launch = options(args)
    if not opts.checkpoint:
        return (
            "interrupted; no checkpoint was kept (with --checkpoint DIR, running the same command again resumes "
            "after the last finished epoch)"
        )
    rank = 0 if launch.num_procs else int(os.environ.get("RANK", "0"))  # the ranks commit each epoch together
    state = read_state(Path(opts.checkpoint) / f"rank{rank}")
    if state is None:
        return f"interrupted before the first epoch was checkpointed in {opts.checkpoint}; nothing was kept"
    return f"interrupted after epoch {state['epoch']}; run the same command to resume"


def run_demo(args: argparse.Namespace) -> None:
    from ..datasets import community_graph
    from ..partition.api import partition_graph
    from ..stats import format_stats, partitioning_stats
    from ..tasks import timing
    from ..train import train
    from .partition import dataset_balance

    out = Path(args.out)
    opts, _ = options(args, part_config=str(out / "demo.json"), print_epochs=True)  # checked before any work
    start = time.perf_counter()
    ds = community_graph(num_nodes=args.nodes, noise=args.noise, seed=args.seed)
    print(
        f"generated a community graph: {ds.graph.total_nodes:,} nodes, {ds.graph.total_edges:,} edges, "
        f"{ds.num_classes} classes ({time.perf_counter() - start:.1f} s)"
    )
    start = time.perf_counter()
    partition_graph(
        ds.graph,
        "demo",
        2,
        out,
        part_method="metis",
        balance_ntypes=dataset_balance(ds, "train"),
        overwrite=args.overwrite,
    )
    print(f"partitioned into 2 parts with METIS ({time.perf_counter() - start:.1f} s) -> {out / 'demo.json'}")
    print(format_stats(partitioning_stats(out / "demo.json", verify=True)))
    print("training GraphSAGE on 2 local processes ...")
    timing.forget_command()  # the account is training's: generating and partitioning are printed above
    m = train(opts, num_procs=2, host=args.host)
    print_metrics(m)


def register(sub: Any) -> None:
    from ..tasks.fields import specs
    from ..tasks.options import LaunchOptions, TrainOptions

    tr = command(
        sub,
        "train",
        "train a GNN on a partitioned graph (or a dataset, partitioned first)",
        "Train a GNN with DDP across processes: node classification or link prediction, homogeneous or "
        "heterogeneous graphs. With --num-procs N, start N local ranks (one partition each); without it, "
        "run as one rank of a torchrun job. With --dataset and --task link, validation/test edges are held "
        "out before partitioning. Every option can also come from a config file (--config run.yaml, the "
        "long flag names as keys); flags given override it. Options and the data's names are checked "
        "before any process starts.",
    )
    tr.add_argument(
        "--config",
        metavar="FILE",
        help="YAML (.yaml/.yml) or JSON file of options (keys: the long flag "
        "names, - or _); flags given on the command line override it",
    )
    tr.add_argument(
        "--print-config",
        action="store_true",
        help="print the full configuration (defaults, --config, flags) as YAML and exit without training",
    )
    option_flags(tr, [n for n, s in (specs(LaunchOptions) | specs(TrainOptions)).items() if s.cli])
    security_flags(tr)
    tr.set_defaults(func=run_train, interrupted=interrupted_line)

    demo = command(sub, "demo", "the main job: generate, partition (METIS, 2 parts), train on 2 processes")
    demo.add_argument("--out", default="out/demo", help="output directory")
    demo.add_argument("--nodes", type=positive_int, default=20000, help="nodes of the generated graph")
    demo.add_argument(
        "--noise",
        type=float,
        default=8.0,
        help="feature noise of the generated graph (higher: features say less, structure more)",
    )
    overwrite_flag(demo)
    option_flags(
        demo,
        ["host"] + [n for n, s in specs(TrainOptions).items() if s.cli and n not in _NOT_DEMO],
        defaults={"epochs": 5},
    )
    demo.set_defaults(func=run_demo)


# options the demo sets itself (its graph, its partitions)
_NOT_DEMO = {"part_config", "link_split", "edge_type", "target", "feat", "label", "split_masks"}

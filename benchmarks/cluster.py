"""Training across emulated hosts (network namespaces on this machine, see tests/cluster/harness.py): the
epoch time of one run on 1 host x 2 ranks (both cores), 2 hosts x 1 rank (one core each) and 2 hosts x 2
ranks, and how long the survivor takes to name a lost host for each fault (link cut, SIGSTOP, SIGKILL).

    sudo python benchmarks/cluster.py --nodes 200000 --epochs 3 [--rate 1gbit]

Generates the community graph (``graphshard demo``'s, scaled), partitions it with METIS into 2 and 4
parts, copies each host only the partitions its ranks serve, and trains GraphSAGE with torchrun on every
host (``--eval-every 0``). The epoch figure is the median of the epochs after the first. The faults strike
host 1's rank in epoch 1 (a second into it); "detected" is the time from the fault to the survivor's line,
"stopped" to its torchrun's exit. Needs root (namespaces). Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from partition import machine, write_result  # noqa: E402

from tests.cluster.harness import Cluster, down_on_sigterm, link_queue, unavailable  # noqa: E402
from tests.cluster.jobs import faulted, finish, spread, start  # noqa: E402

# (hosts, ranks per host, cores per host)
LAYOUTS = [(1, 2, 2), (2, 1, 1), (2, 2, 1)]
FAULTS = ("cut", "stop", "kill")


def _train_args(args: argparse.Namespace, config: str) -> list[str]:
    return [
        "train",
        "--part-config",
        config,
        "--fanouts",
        args.fanouts,
        "--batch-size",
        str(args.batch),
        "--epochs",
        str(args.epochs),
        "--eval-every",
        "0",
        "--timeout",
        "600",
        "--metrics-out",
        "m.json",
    ]


def _layout(args, configs: dict[int, Path], hosts: int, per_host: int, cores: int) -> dict:
    parts = hosts * per_host
    c = Cluster(args.work / f"cluster-{hosts}x{per_host}", hosts, args.rate, cores).up()
    try:
        mine = spread(configs[parts], c, [list(range(h * per_host, (h + 1) * per_host)) for h in range(hosts)])
        start_s = time.perf_counter()
        finish(start(c, _train_args(args, mine), per_host=per_host, name="train"), timeout=3600)
        m = json.loads((c.hosts[0].workdir / "m.json").read_text())
        walls = [e["wall_s"] for e in m["epochs"]]
        return {
            "hosts": hosts,
            "ranks_per_host": per_host,
            "cores_per_host": cores,
            "partitions": parts,
            "run_s": time.perf_counter() - start_s,
            "epoch_s": statistics.median(walls[1:] or walls),
            "epochs_s": walls,
            "test_acc": m["test_acc"],
            "last_epoch": m["epochs"][-1],
        }
    finally:
        c.down()


def _fault(args, configs: dict[int, Path], kind: str) -> dict:
    c = Cluster(args.work / f"cluster-fault-{kind}", 2, args.rate, 1).up()
    try:
        mine = spread(configs[2], c, [[0], [1]])
        began = time.monotonic()
        seconds, line, _ = faulted(c, _train_args(args, mine), kind, "training epoch 1", timeout=3600)
        return {"fault": kind, "detected_s": seconds, "line": line, "run_s": time.monotonic() - began}
    finally:
        c.down()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=200_000)
    p.add_argument("--degree", type=int, default=16)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--batch", type=int, default=1024, help="global batch size")
    p.add_argument("--rate", default=None, help="cap every host's link, e.g. 1gbit (default: unshaped)")
    p.add_argument("--skip-faults", action="store_true")
    p.add_argument("--work", type=Path, default=Path("bench-out/cluster"))
    p.add_argument("--json", type=Path, default=Path("bench-out/cluster.json"))
    args = p.parse_args()
    args.work = args.work.resolve()
    reason = unavailable()
    if reason:
        sys.exit(f"benchmarks/cluster.py: {reason}")
    down_on_sigterm()  # a terminated benchmark removes its hosts, as an interrupted one does
    from graphshard import partition_graph
    from graphshard.datasets import community_graph

    ds = community_graph(num_nodes=args.nodes, avg_degree=args.degree, noise=8.0, seed=0)
    configs = {}
    for parts in (2, 4):
        out = args.work / f"parts{parts}"
        if not (out / "comm.json").is_file():
            partition_graph(ds.graph, "comm", parts, out, part_method="metis")
        configs[parts] = out / "comm.json"
    runs = []
    for hosts, per_host, cores in LAYOUTS:
        runs.append(_layout(args, configs, hosts, per_host, cores))
        print(f"  {hosts} host(s) x {per_host} rank(s): epoch {runs[-1]['epoch_s']:.2f} s", flush=True)
    faults = [] if args.skip_faults else [_fault(args, configs, kind) for kind in FAULTS]
    result = {
        "machine": machine(),
        "nodes": ds.graph.total_nodes,
        "edges": ds.graph.total_edges,
        "fanouts": args.fanouts,
        "batch": args.batch,
        "epochs": args.epochs,
        "rate": args.rate,
        "link_queue": link_queue("host") if args.rate else None,
        "runs": runs,
        "faults": faults,
    }
    write_result(args.json, result)
    mc = result["machine"]
    print(
        f"machine: {mc['cpu']}, {mc['cores']} cores; community graph {result['nodes']:,} nodes, "
        f"{result['edges']:,} edges; fanouts {args.fanouts}, global batch {args.batch}; links "
        f"{args.rate or 'unshaped'}{', queue in ' + result['link_queue'] if args.rate else ''}"
    )
    print(f"{'hosts x ranks':>14}{'cores/host':>11}{'epoch s':>9}{'epochs s':>22}{'run s':>7}{'test acc':>9}")
    for r in runs:
        walls = " ".join(f"{w:.2f}" for w in r["epochs_s"])
        print(
            f"{r['hosts']:>8} x {r['ranks_per_host']:<3}{r['cores_per_host']:>11}{r['epoch_s']:>9.2f}{walls:>22}"
            f"{r['run_s']:>7.1f}{r['test_acc']:>9.4f}"
        )
    for f in faults:
        print(f"  {f['fault']:>5}: named after {f['detected_s']:.1f} s: {f['line']}")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

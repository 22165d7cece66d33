"""Benchmark of distributed training: epoch time of 1 process x 1 partition against 2 processes x 2
partitions, where the time goes, how many feature bytes METIS and random partitions fetch, what the
remote-feature cache saves (``--cache-ratio`` 0, 0.2, 1.0), and what layer-wise evaluation costs
against an epoch.

    python benchmarks/train.py --nodes 1000000 --degree 20 --epochs 2

Generates the default community graph (``graphshard demo``'s, scaled: ~``nodes * degree`` directed
edges), partitions it (random for 1 part; METIS and random for 2), then trains GraphSAGE node
classification through ``graphshard.train.train`` — the product path — for ``--epochs`` epochs and
reports the last epoch (the first warms up kernels and connections). Times are per-rank means:
sampling, feature fetch, compute (forward, backward, optimiser) and gradient sync (DDP all-reduce,
including waiting for the slower rank); "wait" is the time the training loop waited for its batches (with a
core to spare, batches are built in a background thread: sampling and fetch then overlap compute and
"other" is wall - wait - compute - sync). "inference" is the layer-wise all-node output pass, "eval" the
validation after the last epoch plus the test evaluation (they share one inference pass). Prints a table
and writes JSON.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partition import machine, write_result

# (processes = partitions, partitioner, cache ratio)
CONFIGS = [(1, "random", 0.0), (2, "metis", 0.0), (2, "metis", 0.2), (2, "metis", 1.0), (2, "random", 0.0)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=1_000_000)
    p.add_argument("--degree", type=int, default=20, help="average degree (directed edges per node)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--batch", type=int, default=1024, help="global batch size")
    p.add_argument("--work", type=Path, default=Path("bench-out/train"))
    p.add_argument("--json", type=Path, default=Path("bench-out/train.json"))
    args = p.parse_args()
    from graphshard.datasets import community_graph, save_dataset
    from graphshard.train import TrainOptions, train
    from graphshard.train.run import partition_dataset

    data = args.work / f"community{args.nodes}-d{args.degree}"
    if not (data / "meta.json").is_file():
        start = time.perf_counter()
        ds = community_graph(num_nodes=args.nodes, avg_degree=args.degree, noise=8.0, seed=0)
        save_dataset(ds, data)
        print(
            f"generated {ds.graph.total_nodes:,} nodes, {ds.graph.total_edges:,} edges "
            f"in {time.perf_counter() - start:.1f} s -> {data}"
        )
    fanouts = [int(f) for f in args.fanouts.split(",")]
    rows = []
    for procs, method, ratio in CONFIGS:
        start = time.perf_counter()
        partition_dataset(str(data), str(args.work / f"{procs}parts-{method}"), procs, method)
        part_s = time.perf_counter() - start
        opts = TrainOptions(
            fanouts=fanouts,
            num_layers=len(fanouts),
            batch_size=args.batch,
            epochs=args.epochs,
            eval_every=0,
            progress=False,
            timeout=1800,
            cache_ratio=ratio,
        )
        start = time.perf_counter()
        m = train(opts, num_procs=procs, dataset=str(data), work_dir=str(args.work), part_method=method)
        rows.append(
            {
                "processes": procs,
                "partitions": m["num_parts"],
                "method": method,
                "cache_ratio": ratio,
                "partition_s": part_s,
                "run_s": time.perf_counter() - start,
                "last_epoch": m["epochs"][-1],
                "epochs": m["epochs"],
                "test_acc": m["test_acc"],
                "inference_s": m["inference_s"],
                "time": m["time"],
                "cache_build_s": m.get("cache_build_s", 0.0),
                "cache_rows": m.get("cache_rows", 0),
            }
        )
        print(f"  {procs} x {method}, cache {ratio}: done in {rows[-1]['run_s']:.0f} s", flush=True)
    result = {
        "machine": machine(),
        "nodes": args.nodes,
        "degree": args.degree,
        "fanouts": fanouts,
        "batch": args.batch,
        "epochs": args.epochs,
        "runs": rows,
    }
    write_result(args.json, result)
    _print(result)
    print(f"wrote {args.json}")


def _print(result: dict) -> None:
    mc = result["machine"]
    print(
        f"machine: {mc['cpu']}, {mc['cores']} cores; community graph {result['nodes']:,} nodes, degree "
        f"{result['degree']}; fanouts {result['fanouts']}, global batch {result['batch']}; last of "
        f"{result['epochs']} epochs"
    )
    print(
        f"{'procs x parts':>13}{'method':>8}{'cache':>6}{'epoch s':>8}{'wait':>5}{'sample':>7}{'fetch':>6}"
        f"{'compute':>8}"
        f"{'sync':>5}{'other':>6}{'remote MB':>10}{'hits':>6}{'build s':>8}{'infer s':>8}{'x epoch':>8}"
        f"{'eval s':>7}{'x epoch':>8}{'test acc':>9}"
    )
    for r in result["runs"]:
        e = r["last_epoch"]
        other = e["wall_s"] - e["wait_s"] - e["compute_s"] - e["comm_s"]
        asked = e.get("cache_hits", 0) + e.get("cache_misses", 0)
        hits = f"{e['cache_hits'] / asked:.0%}" if asked else "-"
        ev = r["time"].get("evaluation_s", 0.0)
        print(
            f"{r['processes']:>6} x {r['partitions']:<5}{r['method']:>8}{r['cache_ratio']:>6}{e['wall_s']:>8.1f}"
            f"{e['wait_s']:>5.1f}"
            f"{e['sample_s']:>7.1f}{e['fetch_s']:>6.1f}{e['compute_s']:>8.1f}{e['comm_s']:>5.1f}{other:>6.1f}"
            f"{e['fetch_bytes'] / 1e6:>10.1f}{hits:>6}{r['cache_build_s']:>8.2f}{r['inference_s']:>8.1f}"
            f"{r['inference_s'] / e['wall_s']:>8.2f}{ev:>7.1f}{ev / e['wall_s']:>8.2f}{r['test_acc']:>9.4f}"
        )
    print("end to end (s):")
    for r in result["runs"]:
        t = r["time"]
        print(
            f"  {r['processes']} x {r['method']}, cache {r['cache_ratio']}: "
            + ", ".join(f"{k[:-2]} {v:.1f}" for k, v in t.items() if k.endswith("_s"))
        )


if __name__ == "__main__":
    main()

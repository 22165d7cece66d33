"""Benchmark of the out-of-core pipeline (issue 3): assign + dispatch on W local ranks vs partition_graph.

    python benchmarks/pipeline.py --scale 21 --edge-factor 16 --feat-dim 64 --parts 4 --ranks 2

Generates an R-MAT graph once, chunks it (NumPy chunks) into --data, then runs, each in a fresh
process: the assignment step (random), dispatch with --ranks local ranks (per-rank phase times and
peak RSS from the ranks' logs), and partition_graph on the same graph and assignment. Prints a table
and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partition import machine, peak_rss


def child(args) -> dict:
    import logging

    import numpy as np

    if args.child == "assign":
        from graphshard.pipeline.assign import assign_chunked

        start = time.perf_counter()
        assign_chunked(args.chunked, args.work / "assign", args.parts, "random")
        return {"seconds": time.perf_counter() - start, "peak_rss": peak_rss()}
    if args.child == "dispatch":
        from graphshard.pipeline.dispatch import DispatchOptions, run_dispatch

        logging.getLogger("graphshard").setLevel(logging.INFO)
        start = time.perf_counter()
        run_dispatch(
            DispatchOptions(args.chunked, args.work / "assign", args.work / "dispatched"),
            num_procs=args.ranks,
            timeout=1800,
        )
        return {"seconds": time.perf_counter() - start}
    from graphshard import partition_graph
    from graphshard.datasets import load_dataset
    from graphshard.pipeline.assignment_files import read_assignment

    g = load_dataset(args.data).graph
    per_type, _ = read_assignment(args.work / "assign", g.num_nodes)
    explicit = np.concatenate([per_type[t] for t in g.ntypes])
    start = time.perf_counter()
    partition_graph(g, "bench", args.parts, args.work / "in_memory", part_method=explicit)
    return {"seconds": time.perf_counter() - start, "peak_rss": peak_rss()}


def run(kind: str, args) -> tuple[dict, str]:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        kind,
        "--data",
        str(args.data),
        "--chunked",
        str(args.chunked),
        "--work",
        str(args.work),
        "--parts",
        str(args.parts),
        "--ranks",
        str(args.ranks),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"{kind} failed:\n{res.stderr[-4000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr


def rank_stats(log: str, ranks: int) -> list[dict]:
    out = []
    for r in range(ranks):
        phases: dict[str, float] = {}
        for m in re.finditer(rf"rank {r} ([a-zA-Z+ ()]+): ([\d.]+) s", log):  # phases repeat: sum them
            phases[m.group(1)] = phases.get(m.group(1), 0.0) + float(m.group(2))
        rss = re.search(rf"rank {r} done: peak RSS (\d+) bytes", log)
        out.append({"phases": phases, "peak_rss": int(rss.group(1)) if rss else None})
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=int, default=21)
    p.add_argument("--edge-factor", type=int, default=16)
    p.add_argument("--feat-dim", type=int, default=64)
    p.add_argument("--parts", type=int, default=4)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--chunks", type=int, default=8)
    p.add_argument("--data", type=Path)
    p.add_argument("--chunked", type=Path)
    p.add_argument("--work", type=Path, default=Path("bench-out/pipeline"))
    p.add_argument("--json", type=Path, default=Path("bench-out/pipeline.json"))
    p.add_argument("--child", choices=["assign", "dispatch", "partition_graph"], help=argparse.SUPPRESS)
    args = p.parse_args()
    args.data = args.data or Path(f"bench-out/rmat{args.scale}")
    args.chunked = args.chunked or Path(f"bench-out/rmat{args.scale}-chunked{args.chunks}")
    if args.child:
        print(json.dumps(child(args)))
        return
    from graphshard.chunked.writer import chunk_graph
    from graphshard.datasets import load_dataset, rmat_graph, save_dataset

    if not (args.data / "meta.json").is_file():
        save_dataset(rmat_graph(args.scale, args.edge_factor, args.feat_dim, seed=0), args.data)
    ds = load_dataset(args.data)
    g = ds.graph
    whole = sum(a.nbytes for pair in g.edges.values() for a in pair) + sum(
        a.nbytes for f in g.node_feats.values() for a in f.values()
    )
    if not (args.chunked / "metadata.json").is_file():
        chunk_graph(g, args.chunked, args.chunks, "numpy", graph_name="bench")
    n_edges = g.total_edges
    del g, ds
    results = {
        "machine": machine(),
        "graph": {
            "scale": args.scale,
            "edge_factor": args.edge_factor,
            "feat_dim": args.feat_dim,
            "edges": n_edges,
            "bytes": whole,
        },
        "parts": args.parts,
        "ranks": args.ranks,
        "chunks": args.chunks,
    }
    results["assign"], _ = run("assign", args)
    results["dispatch"], log = run("dispatch", args)
    results["dispatch"]["ranks"] = rank_stats(log, args.ranks)
    results["partition_graph"], _ = run("partition_graph", args)
    same = all(
        (args.work / "in_memory" / f.relative_to(args.work / "dispatched")).read_bytes() == f.read_bytes()
        for f in (args.work / "dispatched").rglob("*.safetensors")
    )
    results["identical_partition_files"] = same
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1))
    gb = 2**30
    m = results["machine"]
    print(
        f"machine: {m['cpu']}, {m['cores']} cores, {m['memory_bytes'] / gb:.0f} GiB; graph: {n_edges:,} edges, "
        f"{whole / gb:.2f} GiB in all; {args.parts} parts, {args.ranks} ranks, {args.chunks} chunks"
    )
    print(f"{'step':<34}{'time s':>9}{'peak RSS GiB':>14}{'RSS / graph':>13}")
    print(f"{'assign (random)':<34}{results['assign']['seconds']:>9.2f}{results['assign']['peak_rss'] / gb:>14.2f}")
    print(f"{'dispatch end to end':<34}{results['dispatch']['seconds']:>9.2f}")
    for r, st in enumerate(results["dispatch"]["ranks"]):
        for name, sec in st["phases"].items():
            print(f"{'  rank ' + str(r) + ' ' + name:<34}{sec:>9.2f}")
        rss = st["peak_rss"] or 0
        print(f"{'  rank ' + str(r) + ' peak':<34}{'':>9}{rss / gb:>14.2f}{rss / whole:>13.2f}")
    per_rank = n_edges / args.ranks / results["dispatch"]["seconds"]
    print(f"{'dispatch edges/s per rank':<34}{per_rank:>9.3g}")
    pg = results["partition_graph"]
    print(
        f"{'partition_graph (same assignment)':<34}{pg['seconds']:>9.2f}{pg['peak_rss'] / gb:>14.2f}"
        f"{pg['peak_rss'] / whole:>13.2f}"
    )
    print(f"partition files identical: {same}")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

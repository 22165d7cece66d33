"""Benchmark of local (single-process) neighbour sampling (issue 4, first part).

    python benchmarks/sampling.py --scale 20 --fanouts 15,10,5 --batch 1024 --threads 1

Samples mini-batches of random seeds on the in-adjacency of an R-MAT graph and reports seeds/s and
sampled edges/s (the issue's target: >= 10 M sampled edges/s on one core). Prints a table, writes JSON.
The distributed part (2 ranks, remote share, bytes per batch) comes with the distributed sampler.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partition import machine


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=int, default=20)
    p.add_argument("--edge-factor", type=int, default=16)
    p.add_argument("--fanouts", default="15,10,5")
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--batches", type=int, default=50)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--data", type=Path)
    p.add_argument("--json", type=Path, default=Path("bench-out/sampling.json"))
    args = p.parse_args()
    from graphshard.datasets import load_dataset, rmat_graph, save_dataset
    from graphshard.partition.kernels import stable_order
    from graphshard.sampling import CSCGraph, NeighborSampler

    data = args.data or Path(f"bench-out/rmat{args.scale}")
    if not (data / "meta.json").is_file():
        save_dataset(rmat_graph(args.scale, args.edge_factor, 0, seed=0), data)
    g = load_dataset(data).graph
    src, dst = g.edges[("_N", "_E", "_N")]
    n = g.num_nodes["_N"]
    order, offsets = stable_order(np.asarray(dst), n)
    graph = CSCGraph(offsets, np.asarray(src)[order], edge_ids=order)
    numba.set_num_threads(args.threads)
    fanouts = [int(f) for f in args.fanouts.split(",")]
    rng = np.random.default_rng(0)
    has_edges = np.flatnonzero(np.diff(offsets) > 0)
    batches = [has_edges[rng.permutation(has_edges.shape[0])[: args.batch]] for _ in range(args.batches)]
    sampler = NeighborSampler(graph, fanouts)
    sampler.sample(batches[0])  # compile / load kernels
    edges = nodes = 0
    start = time.perf_counter()
    for b, seeds in enumerate(batches):
        out = sampler.sample(seeds, seed=b)
        edges += out.edge.shape[0]
        nodes += out.node.shape[0]
    sec = time.perf_counter() - start
    res = {
        "machine": machine(),
        "scale": args.scale,
        "edges": int(src.shape[0]),
        "fanouts": fanouts,
        "batch": args.batch,
        "batches": args.batches,
        "threads": args.threads,
        "seconds": sec,
        "seeds_per_s": args.batch * args.batches / sec,
        "sampled_edges_per_s": edges / sec,
        "sampled_nodes_per_batch": nodes / args.batches,
        "sampled_edges_per_batch": edges / args.batches,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(res, indent=1))
    print(
        f"machine: {res['machine']['cpu']}, {res['machine']['cores']} cores; R-MAT scale {args.scale}: "
        f"{res['edges']:,} edges; fanouts {fanouts}, batch {args.batch}, {args.threads} thread(s)"
    )
    print(f"{'seeds/s':>12}{'sampled edges/s':>18}{'edges/batch':>14}{'nodes/batch':>14}")
    print(
        f"{res['seeds_per_s']:>12,.0f}{res['sampled_edges_per_s']:>18,.0f}{res['sampled_edges_per_batch']:>14,.0f}"
        f"{res['sampled_nodes_per_batch']:>14,.0f}"
    )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

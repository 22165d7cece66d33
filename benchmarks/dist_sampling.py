"""Benchmark of distributed sampling and feature fetching with 2 ranks on 2 partitions (issue 4, second part).

    python benchmarks/dist_sampling.py --scale 20 --fanouts 15,10,5 --batch 1024 --method random

Partitions an R-MAT graph (64-d features) into as many parts as ranks, then every rank samples mini-batches
of its own nodes with DistNeighborSampler and fetches the features of every sampled node through
DistFeatureStore. Reports per rank: sampled edges/s, share of seeds sent to another rank, bytes moved per
batch, feature-fetch GB/s. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partition import machine


def _rank(config: str, fanouts: list[int], batch: int, batches: int, out: str) -> None:
    import os

    from graphshard.distributed.groups.rpc import init_rpc, shutdown_rpc
    from graphshard.distributed.ranks.context import DistContext
    from graphshard.distributed.remote.sampler import DistNeighborSampler
    from graphshard.distributed.runtime.graph import DistGraph

    with DistContext.from_env(timeout=600) as ctx:
        group = init_rpc(ctx)
        try:
            dg = DistGraph(Path(config).stem, config)
            book = dg.get_partition_book()
            sampler = DistNeighborSampler(group, dg.sampling_graph, book, fanouts)
            feats = dg.features
            mine = book.partid2nids(ctx.rank).numpy()
            rng = np.random.default_rng(ctx.rank)
            seeds = [mine[rng.permutation(mine.shape[0])[:batch]] for _ in range(batches + 1)]
            out0 = sampler.sample(seeds[0])  # warm-up: kernels, RPC connections
            feats.lookup("_N", "feat", out0.node)
            for d in (sampler.stats, feats.stats):
                for k in d:
                    d[k] = 0
            t_sample = t_feat = 0.0
            edges = nodes = 0
            for b in range(1, batches + 1):
                t = time.perf_counter()
                o = sampler.sample(seeds[b], seed=b)
                t_sample += time.perf_counter() - t
                t = time.perf_counter()
                feats.lookup("_N", "feat", o.node)
                t_feat += time.perf_counter() - t
                edges += o.edge.shape[0]
                nodes += o.node.shape[0]
            res = {
                "rank": ctx.rank,
                "batches": batches,
                "sample_seconds": t_sample,
                "feature_seconds": t_feat,
                "sampled_edges_per_s": edges / t_sample,
                "nodes_per_batch": nodes / batches,
                "edges_per_batch": edges / batches,
                "sampler": dict(sampler.stats),
                "features": dict(feats.stats),
            }
            Path(out).with_name(f"{Path(out).stem}.rank{ctx.rank}.json").write_text(json.dumps(res))
        finally:
            shutdown_rpc(group)
    os.environ.pop("RANK", None)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=int, default=20)
    p.add_argument("--fanouts", default="15,10,5")
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--method", default="random", choices=["random", "metis", "kaminpar"])
    p.add_argument("--data", type=Path)
    p.add_argument("--work", type=Path, default=Path("bench-out/dist_sampling"))
    p.add_argument("--json", type=Path, default=Path("bench-out/dist_sampling.json"))
    args = p.parse_args()
    from graphshard import partition_graph
    from graphshard.datasets import load_dataset, rmat_graph, save_dataset
    from graphshard.distributed.ranks.launcher import launch

    data = args.data or Path(f"bench-out/rmat{args.scale}")
    if not (data / "meta.json").is_file():
        save_dataset(rmat_graph(args.scale, 16, 64, seed=0), data)
    config = args.work / args.method / "g.json"
    if not config.is_file():
        partition_graph(load_dataset(data).graph, "g", args.ranks, config.parent, part_method=args.method)
    fanouts = [int(f) for f in args.fanouts.split(",")]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    launch(_rank, args.ranks, (str(config), fanouts, args.batch, args.batches, str(args.json)), timeout=600)
    ranks = [json.loads(args.json.with_name(f"{args.json.stem}.rank{r}.json").read_text()) for r in range(args.ranks)]
    result = {
        "machine": machine(),
        "scale": args.scale,
        "method": args.method,
        "fanouts": fanouts,
        "batch": args.batch,
        "ranks": ranks,
    }
    args.json.write_text(json.dumps(result, indent=1))
    print(
        f"machine: {result['machine']['cpu']}, {result['machine']['cores']} cores; R-MAT scale {args.scale}, "
        f"{args.method} partitions, {args.ranks} ranks; fanouts {fanouts}, batch {args.batch}"
    )
    print(
        f"{'rank':>4}{'sampled edges/s':>17}{'remote seeds':>14}{'KB sent/batch':>15}{'MB recv/batch':>15}"
        f"{'feat GB/s':>11}{'remote rows':>13}"
    )
    for r in ranks:
        s, f, b = r["sampler"], r["features"], r["batches"]
        feat_bytes = r["nodes_per_batch"] * b * 64 * 4
        print(
            f"{r['rank']:>4}{r['sampled_edges_per_s']:>17,.0f}{s['remote_seeds'] / max(1, s['seeds']):>14.1%}"
            f"{s['bytes_sent'] / b / 1e3:>15.1f}{(s['bytes_received'] + f['bytes_received']) / b / 1e6:>15.2f}"
            f"{feat_bytes / r['feature_seconds'] / 1e9:>11.2f}{f['remote_rows'] / max(1, f['rows']):>13.1%}"
        )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

"""Benchmark of the remote-feature cache on any partitioned graph: remote feature bytes one epoch of
training batches fetches with ``--cache-ratio`` 0, 0.2, 0.5, 1.0 (by running the loader with the cache
attached), the share of remote reads each cache served, and, for scale, what a cache of the same size
chosen with hindsight (the nodes that epoch actually read most) would have served.

    python benchmarks/cache.py --part-config bench-out/load-rmat20-4/rmat20.json --num-procs 4
    python benchmarks/cache.py --part-config bench-out/train/2parts-metis/.../community1000000_d20.json

Seeds: the ``train_mask`` nodes where the graph has one, else every 8th node. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partition import machine

RATIOS = (0.0, 0.2, 0.5, 1.0)


def _rank(config: str, fanouts: list[int], batch: int, out: str) -> None:
    import torch

    from graphshard.distributed.loaders.loader import DistNeighborLoader
    from graphshard.distributed.remote.cache import build_cache
    from graphshard.distributed.runtime.graph import DistGraph
    from graphshard.distributed.runtime.session import session
    from graphshard.distributed.runtime.split import node_split
    from graphshard.tasks.loop import graph_name

    with session(timeout=1200) as s:
        g = DistGraph(graph_name(config), config)
        book, t = g.get_partition_book(), g.ntypes[0]
        if "train_mask" in g.ndata:
            mask = g.ndata["train_mask"][torch.arange(g.num_nodes())].numpy().astype(bool)
        else:
            mask = np.zeros(g.num_nodes(), bool)
            mask[::8] = True
        seeds = node_split(mask, book, rank=s.rank, world_size=s.world_size).numpy()
        rows = []
        counts = np.zeros(g.num_nodes(), np.int64)
        for ratio in RATIOS:
            cache = build_cache(g, {t: seeds}, fanouts, ["feat"], ratio=ratio) if ratio else None
            g.features.attach_cache(cache)
            before, start = g.features.stats["bytes_received"], time.perf_counter()
            with DistNeighborLoader(
                g, fanouts, seeds, batch, shuffle=True, label_name=None, prefetch=0, seed=0
            ) as loader:
                for b in loader:
                    if ratio == 0.0:
                        counts[b.n_id.numpy()] += 1
            rows.append(
                {
                    "ratio": ratio,
                    "bytes": g.features.stats["bytes_received"] - before,
                    "epoch_s": time.perf_counter() - start,
                    "hits": cache.stats["hits"] if cache else 0,
                    "lookups": cache.stats["lookups"] if cache else 0,
                    "build_s": cache.build_s if cache else 0.0,
                    "cache_rows": cache.num_rows if cache else 0,
                }
            )
            g.features.attach_cache(None)
        remote = counts * (book.nid2partid(np.arange(g.num_nodes())).numpy() != g.part_id)
        ranked = np.sort(remote)[::-1]
        for r in rows:
            r["hindsight_share"] = float(ranked[: r["cache_rows"]].sum() / max(1, remote.sum()))
        Path(out, f"rank{s.rank}.json").write_text(json.dumps(rows))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part-config", required=True)
    p.add_argument("--num-procs", type=int, default=2)
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--batch", type=int, default=512, help="seeds per rank per batch")
    p.add_argument("--json", type=Path, default=Path("bench-out/cache.json"))
    args = p.parse_args()
    from graphshard.distributed.ranks.launcher import launch

    fanouts = [int(f) for f in args.fanouts.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        launch(_rank, args.num_procs, (args.part_config, fanouts, args.batch, tmp), timeout=3600)
        ranks = [json.loads(Path(tmp, f"rank{r}.json").read_text()) for r in range(args.num_procs)]
    rows = []
    for i, ratio in enumerate(RATIOS):
        per = [r[i] for r in ranks]
        rows.append(
            {
                "ratio": ratio,
                "bytes": sum(x["bytes"] for x in per),
                "hit_share": sum(x["hits"] for x in per) / max(1, sum(x["lookups"] for x in per)),
                "hindsight_share": float(np.mean([x["hindsight_share"] for x in per])),
                "build_s": max(x["build_s"] for x in per),
                "epoch_s": max(x["epoch_s"] for x in per),
            }
        )
    result = {
        "machine": machine(),
        "part_config": args.part_config,
        "num_procs": args.num_procs,
        "fanouts": fanouts,
        "batch": args.batch,
        "rows": rows,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    base = rows[0]["bytes"]
    print(
        f"machine: {result['machine']['cpu']}, {result['machine']['cores']} cores; {args.part_config}, "
        f"{args.num_procs} ranks, fanouts {fanouts}, {args.batch} seeds per rank per batch"
    )
    print(
        f"{'cache ratio':>11}{'remote MB':>11}{'x no cache':>11}{'hits':>7}{'hindsight':>10}{'build s':>9}"
        f"{'epoch s':>9}"
    )
    for r in rows:
        print(
            f"{r['ratio']:>11}{r['bytes'] / 1e6:>11.1f}{r['bytes'] / max(1, base):>11.2f}{r['hit_share']:>7.0%}"
            f"{r['hindsight_share']:>10.0%}{r['build_s']:>9.2f}{r['epoch_s']:>9.1f}"
        )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

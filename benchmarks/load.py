"""Cost of the validation every ``load_partition`` runs by default (issue 10), on the R-MAT benchmark graph.

For each partition: a plain load (the same loader with the structural checks switched off), the default
load (structure checked against the config), the structural check alone, and ``verify=True`` (sha256 of
every file: one full read). Files are read once first, so every figure is with a warm page cache.
Prints a table and writes JSON.

    python benchmarks/load.py --scale 20 --edge-factor 16 --feat-dim 64 --parts 4
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partition import machine  # noqa: E402


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=20)
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--feat-dim", type=int, default=64)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="bench-out/load.json")
    args = ap.parse_args()
    import graphshard.format.load as load
    from graphshard import load_partition, partition_graph
    from graphshard.datasets import load_dataset, rmat_graph, save_dataset
    from graphshard.format.config import read_config

    data = Path(f"bench-out/rmat{args.scale}")
    parts = Path(f"bench-out/load-rmat{args.scale}-{args.parts}")
    config = parts / f"rmat{args.scale}.json"
    if not config.is_file():
        if not (data / "meta.json").is_file():
            save_dataset(rmat_graph(args.scale, args.edge_factor, args.feat_dim, seed=0), data)
        partition_graph(load_dataset(data).graph, f"rmat{args.scale}", args.parts, parts, part_method="random")
    cfg = read_config(config)
    checks = load.check_structure
    rows = []
    for p in range(cfg.num_parts):
        touch = lambda: [f.read_bytes() for f in (parts / f"part{p}").iterdir()]  # noqa: E731
        touch()  # warm the page cache: every figure below reads from memory
        default = best_of(lambda: load_partition(config, p), args.repeats)
        load.check_structure = lambda *a: None
        plain = best_of(lambda: load_partition(config, p), args.repeats)
        load.check_structure = checks
        part = load_partition(config, p, load_feats=False)
        tensors = {f"node/{k}": v for k, v in part.graph.ndata.items()} | {f"edge/{k}": v for k, v in part.graph.edata.items()}
        tensors |= {"indptr": part.graph.indptr, "indices": part.graph.indices}
        alone = best_of(lambda: checks(cfg, p, tensors, config), args.repeats)
        verify = best_of(lambda: load_partition(config, p, verify=True), 1)
        size = sum(f.stat().st_size for f in (parts / f"part{p}").iterdir())
        rows.append({"part": p, "bytes": size, "edges": part.graph.num_edges, "plain_s": plain, "default_s": default,
                     "check_s": alone, "verify_s": verify})
    print(f"{'part':>4} {'MB':>8} {'edges':>11} {'plain s':>8} {'default s':>9} {'checks s':>8} {'verify s':>8} "
          f"{'checks/verify':>13}")
    for r in rows:
        print(f"{r['part']:>4} {r['bytes'] / 1e6:>8.1f} {r['edges']:>11,} {r['plain_s']:>8.3f} {r['default_s']:>9.3f} "
              f"{r['check_s']:>8.3f} {r['verify_s']:>8.3f} {r['check_s'] / r['verify_s']:>13.3f}")
    total = {k: sum(r[k] for r in rows) for k in ("plain_s", "default_s", "check_s", "verify_s")}
    print(f"all: plain {total['plain_s']:.3f} s, default {total['default_s']:.3f} s, structural checks "
          f"{total['check_s']:.3f} s = {total['check_s'] / total['verify_s']:.2f} x one checksum read of the files")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"machine": machine(), "args": vars(args), "rows": rows, "total": total},
                                         indent=1))


if __name__ == "__main__":
    main()

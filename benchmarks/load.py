"""Cost of the validation every ``load_partition`` runs by default (issue 10), on the R-MAT benchmark graph.

For each partition:
- plain: the same loader with the structural check switched off (files memory-mapped, identity and
  feature headers still read: those cost a few header reads);
- default: ``load_partition`` as users call it (structure checked against the config);
- checks: the structural check alone (``format.validate.check_structure`` on the loaded tensors);
- verify: ``load_partition(verify=True)`` (adds the sha256 of every file: one full read of them).
Files are read once first, so every figure is with a warm page cache. Prints a table and writes JSON
(with the machine's description).

    python benchmarks/load.py --scale 20 --edge-factor 16 --feat-dim 64 --parts 4
    python benchmarks/load.py --part-config bench-out/partition/random/rmat20.json

The graph is generated as benchmarks/partition.py does (``--data``, default bench-out/rmat<scale>,
reused when present) and partitioned at random into bench-out/load-rmat<scale>-<parts> once.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partition import machine


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def build(args) -> Path:
    """The benchmark partitions: generated and partitioned once, then reused."""
    from graphshard import partition_graph
    from graphshard.datasets import load_dataset, rmat_graph, save_dataset

    data = args.data or Path(f"bench-out/rmat{args.scale}")
    parts = Path(f"bench-out/load-rmat{args.scale}-{args.parts}")
    config = parts / f"rmat{args.scale}.json"
    if not config.is_file():
        if not (data / "meta.json").is_file():
            save_dataset(rmat_graph(args.scale, args.edge_factor, args.feat_dim, seed=0), data)
        partition_graph(load_dataset(data).graph, f"rmat{args.scale}", args.parts, parts, part_method="random")
    return config


def measure(config: Path, p: int, repeats: int) -> dict:
    import graphshard.format.load as load
    from graphshard import load_partition
    from graphshard.format.config import read_config

    cfg = read_config(config)
    files = [cfg.root / rel for rel in cfg.parts[p].values()]
    for f in files:
        f.read_bytes()  # warm the page cache: every figure below reads from memory
    checks = load.check_structure
    default = best_of(lambda: load_partition(config, p), repeats)
    load.check_structure = lambda *a: None
    try:
        plain = best_of(lambda: load_partition(config, p), repeats)
    finally:
        load.check_structure = checks
    part = load_partition(config, p, load_feats=False)
    tensors = {f"node/{k}": v for k, v in part.graph.ndata.items()} | {
        f"edge/{k}": v for k, v in part.graph.edata.items()
    }
    tensors |= {"indptr": part.graph.indptr, "indices": part.graph.indices}
    alone = best_of(lambda: checks(cfg, p, tensors, cfg.part_path(p, "part_graph")), repeats)
    verify = best_of(lambda: load_partition(config, p, verify=True), 1)
    return {
        "part": p,
        "bytes": sum(f.stat().st_size for f in files),
        "edges": part.graph.num_edges,
        "plain_s": plain,
        "default_s": default,
        "check_s": alone,
        "verify_s": verify,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part-config", type=Path, help="time these partitions instead of building the R-MAT ones")
    ap.add_argument("--data", type=Path, help="dataset directory (generated if missing)")
    ap.add_argument("--scale", type=int, default=20)
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--feat-dim", type=int, default=64)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("bench-out/load.json"))
    args = ap.parse_args()
    from graphshard.format.config import read_config

    config = args.part_config or build(args)
    rows = [measure(config, p, args.repeats) for p in range(read_config(config).num_parts)]
    print(
        f"{'part':>4} {'MB':>8} {'edges':>11} {'plain s':>8} {'default s':>9} {'checks s':>8} {'verify s':>8} "
        f"{'checks/verify':>13}"
    )
    for r in rows:
        print(
            f"{r['part']:>4} {r['bytes'] / 1e6:>8.1f} {r['edges']:>11,} {r['plain_s']:>8.3f} {r['default_s']:>9.3f} "
            f"{r['check_s']:>8.3f} {r['verify_s']:>8.3f} {r['check_s'] / r['verify_s']:>13.3f}"
        )
    total = {k: sum(r[k] for r in rows) for k in ("plain_s", "default_s", "check_s", "verify_s")}
    total["edges"] = sum(r["edges"] for r in rows)
    print(
        f"all ({total['edges']:,} stored edges): plain {total['plain_s']:.3f} s, default {total['default_s']:.3f} s, "
        f"structural checks {total['check_s']:.3f} s = {total['check_s'] / total['verify_s']:.2f} x one checksum "
        "read of the files"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "machine": machine(),
                "config": str(config),
                "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                "rows": rows,
                "total": total,
            },
            indent=1,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

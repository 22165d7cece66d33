"""Reading OGB's raw layout: time and peak memory of ``graphshard chunk --dataset OGB_DIR`` against the
size of the features it holds.

    python benchmarks/ogb_layout.py                     # 200,000 nodes x 256 features, 1 M edges
    python benchmarks/ogb_layout.py --nodes 1000000 --feat-dim 128

Writes a synthetic dataset in OGB's homogeneous raw layout (gzip CSV: edges, features, labels, a split)
under --work, then converts it with ``graphshard chunk`` in a fresh process whose peak RSS (VmHWM) is
read, and the same for a process that only imports what the command imports (the fixed part). Prints a
table and writes JSON (machine named). Run it alone: the timings share 2 cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partition import machine

PEAK = "import sys; {code}; print(int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) * 1024)"


def write_dataset(out: Path, n: int, d: int, e: int) -> None:
    import pyarrow as pa
    import pyarrow.csv as csv

    def write(path: Path, arr: np.ndarray) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        arr = arr if arr.ndim == 2 else arr[:, None]
        table = pa.table({f"c{j}": arr[:, j] for j in range(arr.shape[1])})
        with pa.CompressedOutputStream(str(path), "gzip") as f:
            csv.write_csv(table, f, write_options=csv.WriteOptions(include_header=False))

    rng = np.random.default_rng(0)
    write(out / "raw" / "edge.csv.gz", rng.integers(0, n, (e, 2)))
    write(out / "raw" / "num-node-list.csv.gz", np.array([n]))
    write(out / "raw" / "node-feat.csv.gz", rng.standard_normal((n, d)).astype(np.float32))
    write(out / "raw" / "node-label.csv.gz", rng.integers(0, 10, n))
    for name, part in zip(("train", "valid", "test"), np.split(rng.permutation(n), [n // 2, 3 * n // 4])):
        write(out / "split" / "random" / f"{name}.csv.gz", np.sort(part))


def peak(code: str) -> tuple[int, float]:
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", PEAK.format(code=code)], capture_output=True, text=True, check=True)
    return int(res.stdout.strip().splitlines()[-1]), time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=200_000)
    p.add_argument("--feat-dim", type=int, default=256)
    p.add_argument("--edges", type=int, default=1_000_000)
    p.add_argument("--work", type=Path, default=Path("bench-out/ogb"))
    p.add_argument("--json", type=Path, default=Path("bench-out/ogb_layout.json"))
    args = p.parse_args()
    data = args.work / "ogbn-synth"
    if not (data / "raw" / "num-node-list.csv.gz").is_file():
        write_dataset(data, args.nodes, args.feat_dim, args.edges)
    fixed, _ = peak("import graphshard.cli, graphshard.datasets.ogb, graphshard.chunked.writer, pyarrow.csv")
    out = args.work / "chunked"
    code = (
        f"from graphshard.cli import main; main(['chunk', '--dataset', {str(data)!r}, '--out', {str(out)!r}, "
        "'--num-chunks', '4', '--overwrite'])"
    )
    whole, seconds = peak(code)
    feat = args.nodes * args.feat_dim * 4
    edges = args.edges * 16
    row = {
        "nodes": args.nodes,
        "feat_dim": args.feat_dim,
        "edges": args.edges,
        "feature_bytes": feat,
        "edge_bytes": edges,
        "fixed_peak": fixed,
        "chunk_peak": whole,
        "seconds": seconds,
        "growth_over_features": (whole - fixed) / feat,
    }
    print(
        "| nodes | features | edges | feature MiB | edge MiB | chunk s | peak MiB | fixed MiB "
        "| (peak − fixed) / features |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {args.nodes:,} | {args.feat_dim} | {args.edges:,} | {feat / 2**20:.0f} | {edges / 2**20:.0f} | "
        f"{seconds:.1f} | {whole / 2**20:.0f} | {fixed / 2**20:.0f} | {row['growth_over_features']:.2f} |"
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"machine": machine(), "rows": [row]}, indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

"""Calibrate the memory planner's dispatch and training models: run both steps on chunked R-MAT graphs of
several scales (64-d features, stream assignments with balanced edges, 2 and 4 partitions on 2
processes), measure each process's peak of private memory, and print it next to the prediction.

    python benchmarks/plan_calibration.py                      # scales 10 16 18 19 20 21
    python benchmarks/plan_calibration.py --scales 18 --parts 4

Writes ``bench-out/plan_calibration.json``. Memory figures are private (anonymous) memory sampled from
/proc every 10 ms; run alone (other processes do not change them, but they slow the run).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partition import machine

from graphshard.datasets.rmat_chunked import write_rmat_chunked
from graphshard.format.config import read_config
from graphshard.pipeline.assign import assign_chunked
from graphshard.pipeline.dispatch.cost import counted_estimates
from graphshard.plan.measure import peak_private
from graphshard.train.cost import (
    feature_width,
    train_estimates,
)

GS = [sys.executable, "-m", "graphshard.cli"]
MiB = 2**20


def one(work: Path, scale: int, parts: int, procs: int) -> list[dict]:
    data, assignment, out = work / f"r{scale}", work / f"r{scale}-a{parts}", work / f"r{scale}-p{parts}"
    if not (data / "metadata.json").is_file():
        write_rmat_chunked(data, scale, feat_dim=64, num_classes=4, num_chunks=8)
    assign_chunked(data, assignment, parts, "stream", balance_edges=True, overwrite=True)
    rows = []
    measured = peak_private(
        [
            *GS,
            "dispatch",
            "--dataset",
            str(data),
            "--assignment",
            str(assignment),
            "--out",
            str(out),
            "--num-procs",
            str(procs),
            "--overwrite",
        ]
    )
    predicted = counted_estimates(str(data), str(assignment), parts, procs)[0]
    rows.append(
        {
            "step": "dispatch",
            "scale": scale,
            "parts": parts,
            "measured_mib": max(measured.values()) / MiB,
            "predicted_mib": max(e.peak_bytes for e in predicted) / MiB,
        }
    )
    cfg = read_config(out / f"rmat{scale}.json")
    for sampled in (False, True):
        cmd = [
            *GS,
            "train",
            "--part-config",
            str(cfg.path),
            "--num-procs",
            str(procs),
            "--epochs",
            "1",
            "--fanouts",
            "5,5",
            "--batch-size",
            "1024",
            *(["--eval-fanouts", "5,5"] if sampled else []),
        ]
        measured = peak_private(cmd)
        predicted = train_estimates(cfg, procs, feature_width(cfg), 64, layerwise=not sampled)
        rows.append(
            {
                "step": "train" + (" (sampled eval)" if sampled else ""),
                "scale": scale,
                "parts": parts,
                "measured_mib": max(measured.values()) / MiB,
                "predicted_mib": max(e.peak_bytes for e in predicted) / MiB,
            }
        )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scales", type=int, nargs="+", default=[10, 16, 18, 19, 20, 21])
    p.add_argument("--parts", type=int, nargs="+", default=[2, 4])
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--work", type=Path, default=Path("bench-out/plan-calibration"))
    p.add_argument("--json", type=Path, default=Path("bench-out/plan_calibration.json"))
    args = p.parse_args()
    rows = []
    print(f"{'step':<22} {'scale':>5} {'parts':>5} {'measured MiB':>13} {'predicted MiB':>14} {'ratio':>6}")
    for scale in args.scales:
        for parts in args.parts:
            for r in one(args.work, scale, parts, args.procs):
                rows.append(r)
                print(
                    f"{r['step']:<22} {scale:>5} {parts:>5} {r['measured_mib']:>13.0f} {r['predicted_mib']:>14.0f} "
                    f"{r['predicted_mib'] / r['measured_mib']:>6.2f}",
                    flush=True,
                )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"machine": machine(), "procs": args.procs, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

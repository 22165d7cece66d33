"""Peak private memory of every rank of ``train`` and ``embed`` beside the planner's figure for that rank.

    python benchmarks/rank_memory.py --part-config parts/rmat23.json --procs 4
    python benchmarks/rank_memory.py --part-config parts/rmat25.json --procs 4 --skip-train --checkpoint ckpt

Trains one epoch (fanouts 10,10, batch 1024, sampled evaluation ``--eval-fanouts 10,10``, hidden 64,
``--num-classes``, a checkpoint) and then runs ``embed`` from that checkpoint (layer-wise inference of every
node), each on ``--procs`` local ranks. Each process's private memory (RssAnon) is sampled from /proc every
10 ms; ranks are the processes that start no other (not the launcher, not its fork server), told apart by
start order (rank 0 first: their PIDs ascend), multiprocessing's helpers left out. Prints a table and writes
JSON (machine named). Memory figures do not depend on other load, but run it alone: the processes share the
cores.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partition import machine, write_result

from graphshard.format.config import read_config
from graphshard.plan.measure import leaf_peaks
from graphshard.train.cost import feature_width, train_estimates

GS = [sys.executable, "-m", "graphshard.cli"]
GiB = 2**30


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part-config", required=True, type=Path)
    p.add_argument("--procs", type=int, default=4)
    p.add_argument("--num-classes", type=int, default=8)
    p.add_argument("--checkpoint", type=Path, help="default: a fresh directory beside the config, removed after")
    p.add_argument("--skip-train", action="store_true", help="embed from an existing --checkpoint only")
    p.add_argument("--memory", help="passed to both commands: the memory their guard allows (default: the machine's)")
    p.add_argument("--json", type=Path, default=Path("bench-out/rank_memory.json"))
    args = p.parse_args()
    cfg = read_config(args.part_config)
    own = None if args.checkpoint else Path(tempfile.mkdtemp(prefix="rank-memory-", dir=args.part_config.parent))
    ckpt = args.checkpoint or own / "ckpt"
    out = (own or Path(tempfile.mkdtemp(prefix="rank-memory-"))) / "emb.npy"
    width, rows = feature_width(cfg), []
    memory = ["--timeout", "7200"] + (["--memory", args.memory] if args.memory else [])  # a big rank is slow
    steps = {
        "train": (
            [*GS, "train", "--part-config", str(cfg.path), "--num-procs", str(args.procs), "--epochs", "1"]
            + ["--fanouts", "10,10", "--batch-size", "1024", "--eval-fanouts", "10,10"]
            + ["--num-classes", str(args.num_classes), "--checkpoint", str(ckpt), *memory],
            train_estimates(cfg, args.procs, width, 64, layerwise=False, host_ranks=args.procs),  # as the guards
        ),
        "embed": (
            [*GS, "embed", "--part-config", str(cfg.path), "--checkpoint", str(ckpt), "--num-procs", str(args.procs)]
            + ["--out", str(out), *memory],
            train_estimates(
                cfg,
                args.procs,
                width,
                64,
                layerwise=True,
                layers=2,
                outputs=args.num_classes,
                host_ranks=args.procs,
                training=False,
            ),
        ),
    }
    print(f"{'step':<6} {'rank':>4} {'measured GiB':>13} {'predicted GiB':>14} {'ratio':>6}")
    for step, (cmd, predicted) in steps.items():
        if step == "train" and args.skip_train:
            continue
        start = time.perf_counter()
        measured = leaf_peaks(cmd)
        seconds = time.perf_counter() - start
        for rank, (m, e) in enumerate(zip(measured, predicted)):
            rows.append({"step": step, "rank": rank, "measured": m, "predicted": e.peak_bytes, "seconds": seconds})
            print(f"{step:<6} {rank:>4} {m / GiB:>13.2f} {e.peak_bytes / GiB:>14.2f} {e.peak_bytes / m:>6.2f}")
    write_result(args.json, {"machine": machine(), "config": str(cfg.path), "procs": args.procs, "rows": rows})
    shutil.rmtree(own or out.parent)  # the directory this run made


if __name__ == "__main__":
    main()

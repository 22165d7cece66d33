"""Several tasks on one encoder against each task alone: DBLP's venue of authors (node classification) and
authorship links (paper:written_by:author, link prediction), 2 processes x 2 partitions, side by side in one run.

    python benchmarks/multitask.py [--seeds 0,1,2] [--epochs 15] [--weight-decay 0.0005]
                                   [--schedules sum,alternate] [--out bench-out/multitask.json]

For each seed, graphshard trains through its Python API (``train(TrainOptions(...), num_procs=2, dataset=...)``,
the default model, hidden width, fanouts and learning rate): the node task alone, the link task alone, and both
at once (``--task multi``, the link task's weight 0.5, the node task the main one) under each
``--task-schedule``; every run with ``--epochs`` epochs and ``--weight-decay``, and its test metrics at its best
validation epoch (the node task's accuracy for the node and multi-task runs, MRR for the link run). Prints a
table (means over the seeds, and each seed's figures) and writes JSON naming the machine. Needs the DBLP
dataset directory in ``../shared/data/dblp_hetero`` (or ``--dataset``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from partition import machine, write_result  # noqa: E402

from graphshard.train import TrainOptions, train  # noqa: E402

NODE = {"name": "venue", "task": "node", "metric": ["accuracy", "f1_macro"]}
LINK = {"name": "authorship", "task": "link", "edge_type": "paper:written_by:author", "weight": 0.5}
FIGURES = (("venue", "accuracy"), ("venue", "f1_macro"), ("authorship", "mrr"), ("authorship", "hits@10"))


def runs_of(seed: int, args: argparse.Namespace, work: Path) -> dict[str, dict[str, dict[str, float]]]:
    """Every run of one seed: ``{run: {task: {metric: value}}}``."""
    common = dict(epochs=args.epochs, seed=seed, weight_decay=args.weight_decay, progress=False)

    def fit(**options) -> dict:
        return train(TrainOptions(**options, **common), num_procs=2, dataset=args.dataset, work_dir=str(work))

    out = {
        "alone": {
            "venue": fit(task="node", metric=NODE["metric"])["test_metrics"],
            "authorship": fit(task="link", edge_type=LINK["edge_type"])["test_metrics"],
        }
    }
    for schedule in args.schedules.split(","):
        metrics = fit(task="multi", tasks=[NODE, LINK], main_task="venue", task_schedule=schedule)
        out[f"multi ({schedule})"] = metrics["test_metrics"]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default=str(ROOT.parent / "shared" / "data" / "dblp_hetero"))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--weight-decay", type=float, default=0.0005)
    p.add_argument("--schedules", default="sum,alternate")
    p.add_argument("--out", default="bench-out/multitask.json")
    args = p.parse_args()
    if not Path(args.dataset, "meta.json").is_file():
        sys.exit(f"no DBLP dataset at {args.dataset} (pass --dataset)")
    seeds = [int(s) for s in args.seeds.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        by_seed = {seed: runs_of(seed, args, Path(tmp)) for seed in seeds}
    names = list(by_seed[seeds[0]])
    print(f"{'task':<11} {'metric':<9} " + " ".join(f"{n:>18}" for n in names) + "   per seed")
    table = []
    for task, metric in FIGURES:
        row = {n: statistics.mean(by_seed[s][n][task][metric] for s in seeds) for n in names}
        each = " | ".join(" ".join(f"{by_seed[s][n][task][metric]:.3f}" for n in names) for s in seeds)
        print(f"{task:<11} {metric:<9} " + " ".join(f"{row[n]:>18.4f}" for n in names) + f"   {each}")
        table.append({"task": task, "metric": metric, **row})
    result = {"machine": machine(), "args": vars(args), "table": table, "runs": by_seed}
    write_result(Path(args.out), result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

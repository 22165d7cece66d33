"""Node regression and multi-label classification, edge classification and regression: graphshard on 2
processes x 2 partitions against plain full-batch PyG on the same planted targets, side by side in one run.

    python benchmarks/tasks.py [--nodes 10000] [--seeds 0,1,2] [--epochs 50] [--batch-size 1024]
                               [--out bench-out/tasks.json]

For each task (``generate community --targets regression|multilabel`` or ``--edge-targets classes|regression``,
``--noise 4``; the edge graphs with ``--avg-degree 8``) and seed, graphshard
trains through its Python API (``train(TrainOptions(...), num_procs=2, dataset=...)``: mini-batches of
``--batch-size`` seeds, fanouts 10,10, ``--epochs`` epochs, test metrics at the best validation epoch) and the
reference (``tests/train/plain_pyg.py``: two SAGEConv layers, full batch, one process, ``--ref-epochs`` steps,
scikit-learn's metrics at its best validation epoch; for edges, an MLP of both ends' rows, as graphshard's
``concat`` decoder) on the same dataset directory. Both: hidden 64, dropout 0.5, Adam at lr 0.01. Selection:
RMSE (regression), micro F1 (multi-label), macro F1 (edge classes). Prints a table (means over the seeds) and
writes JSON naming the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))
from partition import machine, write_result  # noqa: E402

from graphshard.datasets import community_graph, save_dataset  # noqa: E402
from graphshard.train import TrainOptions, train  # noqa: E402
from tests.train.plain_pyg import full_batch, full_batch_edges  # noqa: E402

REGRESSION = ("rmse", ("rmse", "mae", "r2"))
TASKS = {  # name -> (label kind, selecting metric and reported ones)
    "regression": ("regression", REGRESSION),
    "multilabel": ("multilabel", ("f1_micro", ("f1_micro", "f1_macro"))),
    "edge-classes": ("classification", ("f1_macro", ("f1_macro", "accuracy"))),
    "edge-regression": ("regression", REGRESSION),
}


def one(task: str, seed: int, args: argparse.Namespace, tmp: Path) -> dict[str, dict[str, float]]:
    data, edge = tmp / f"{task}{seed}", task.startswith("edge-")
    kind, (select, names) = TASKS[task]
    graph = (
        community_graph(num_nodes=args.nodes, avg_degree=8, noise=4.0, seed=seed, edge_targets=task[5:])
        if edge
        else community_graph(num_nodes=args.nodes, noise=4.0, seed=seed, targets=task)
    )
    save_dataset(graph, data)
    opts = TrainOptions(
        task="edge" if edge else "node",
        fanouts=[10, 10],
        batch_size=args.batch_size,
        epochs=args.epochs,
        seed=seed,
        metric=list(names),
        progress=False,
    )
    ours = train(opts, num_procs=2, dataset=str(data), work_dir=str(tmp / "work"))["test_metrics"]
    reference = full_batch_edges if edge else full_batch
    ref = reference(data, kind, select, epochs=args.ref_epochs, seed=seed)
    return {"graphshard": ours, "pyg": {k: ref[k] for k in names}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=10000)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--ref-epochs", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--out", default="bench-out/tasks.json")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    runs: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for task in TASKS:
            runs[task] = [one(task, seed, args, Path(tmp)) for seed in seeds]
    print(f"{'task':<12} {'metric':<9} {'graphshard 2x2':>15} {'plain PyG':>10} {'difference':>11}")
    table = []
    for task, results in runs.items():
        for name in TASKS[task][1][1]:
            ours = statistics.mean(r["graphshard"][name] for r in results)
            ref = statistics.mean(r["pyg"][name] for r in results)
            diff = f"{(ours / ref - 1) * 100:+.1f} %" if name in ("rmse", "mae") else f"{ours - ref:+.4f}"
            print(f"{task:<12} {name:<9} {ours:>15.4f} {ref:>10.4f} {diff:>11}")
            table.append({"task": task, "metric": name, "graphshard": ours, "pyg": ref})
    write_result(Path(args.out), {"machine": machine(), "args": vars(args), "table": table, "runs": runs})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

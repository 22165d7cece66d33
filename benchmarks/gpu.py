"""GPU training against the same machine's CPU cores, side by side in one run (cells interleaved per repeat).

    python benchmarks/gpu.py [--nodes 1000000] [--dims 32,128] [--repeats 1] [--epochs 2]

For each feature width it generates ``benchmarks/train.py``'s community graph (``--nodes`` nodes, about
``nodes * degree`` directed edges; kept in ``--work`` for later runs), partitions it into 2 METIS parts, and
trains GraphSAGE (2 layers, hidden 64, fanouts 10,10, global batch 1024) through ``graphshard.train.train``
in these cells:

- ``cpu1``/``cpu2``: 1 or 2 ranks on the CPU cores alone;
- ``gpu1``/``gpu2``: 1 or 2 ranks on GPU 0 (2 ranks share it: gradients summed on the host);
- ``gpu2+cache``: as ``gpu2`` with ``--cache-device cuda --cache-mb`` ``--cache-mb`` per rank;
- ``samplers2``: the 2 ranks' loaders alone, iterated without a model (what the samplers need for an epoch).

Each cell reports its last epoch (the first warms kernels and connections): the epoch's wall time, seeds per
second (batches x batch size / wall), the split per rank (sample, fetch, copy, compute, wait: compute on a GPU is
the device's own time, from events), ``wait/epoch``, ``epoch/samplers`` (a GPU cell's epoch over ``samplers2``'s),
the epoch over ``cpu2``'s, the device cache's hit rate and the test accuracy. It prints a table and writes JSON
naming the machine and the GPU. Run it alone on the machine. Without a CUDA device it runs the CPU cells only
(and says so). The issue's targets: with 2 ranks on the GPU, wait <= 10 % of the epoch and the epoch <= 1.2 x the
samplers alone; 128-d GPU epoch <= 0.5 x the CPU's; accuracy as on the CPU (+-0.01).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partition import machine, write_result

CELLS = ["cpu1", "cpu2", "gpu1", "gpu2", "gpu2+cache", "samplers2"]


def _samplers(config: str, fanouts: list[int], batch: int, epochs: int, out: str) -> None:
    """One rank of the samplers-alone cell: the training loader of ``train``, iterated for ``epochs``; rank 0
    writes the last epoch's seconds to ``out``."""
    import math

    import numpy as np

    from graphshard.distributed import DistNeighborLoader, session
    from graphshard.tasks.loop import open_graph
    from graphshard.tasks.node import node_task
    from graphshard.train import TrainOptions

    with session(timeout=300) as s:
        opts = TrainOptions(part_config=config)
        g = open_graph(opts)
        seeds = node_task(s, g, opts).split["train"]  # the training run's seeds of this rank
        loader = DistNeighborLoader(
            g, fanouts, seeds, math.ceil(batch / s.world_size), shuffle=True, node_attrs=(), label_name=None
        )
        seconds = 0.0
        with loader:
            for _ in range(epochs):
                start = time.perf_counter()
                for _batch in loader:
                    pass
                g.barrier()
                seconds = time.perf_counter() - start
        if s.rank == 0:
            np.save(out, np.array([seconds, len(loader)]))


def _options(cell: str, args: argparse.Namespace, config: str):
    from graphshard.train import TrainOptions

    gpu = cell.startswith("gpu")
    return TrainOptions(
        part_config=config,
        fanouts=[10, 10],
        batch_size=args.batch,
        hidden=64,
        epochs=args.epochs,
        eval_every=0,
        progress=False,
        device="cuda" if gpu else "cpu",
        cache_device="cuda" if cell.endswith("+cache") else "host",
        cache_mb=args.cache_mb if cell.endswith("+cache") else 0.0,
    )


def run_cell(cell: str, args: argparse.Namespace, config: str, work: Path) -> dict:
    """One cell's figures."""
    from graphshard.distributed import launch
    from graphshard.train import train

    ranks = int(cell.split("+")[0][-1])
    if cell.startswith("samplers"):
        out = work / "samplers.npy"
        launch(_samplers, ranks, (config, [10, 10], args.batch, args.epochs, str(out)), timeout=1800)
        import numpy as np

        seconds, batches = np.load(out)
        return {"cell": cell, "ranks": ranks, "epoch_s": float(seconds), "batches": int(batches)}
    m = train(_options(cell, args, config), num_procs=ranks)
    e = m["epochs"][-1]
    out = {"cell": cell, "ranks": ranks, "epoch_s": e["wall_s"], "batches": e["batches"], "test_acc": m["test_acc"]}
    out |= {k: e.get(k, 0.0) for k in ("sample_s", "fetch_s", "copy_s", "compute_s", "wait_s", "comm_s")}
    out["seeds_per_s"] = e["batches"] * args.batch / max(e["wall_s"], 1e-9)
    if e.get("device_cache_asked"):
        out["device_cache_hit_rate"] = e["device_cache_hits"] / e["device_cache_asked"]
    return out


def _data(args: argparse.Namespace, dim: int) -> str:
    """The community graph of width ``dim``, partitioned into 2 METIS parts (made once, kept in ``--work``)."""
    from graphshard.datasets import community_graph, save_dataset
    from graphshard.train.run import partition_dataset

    data = args.work / f"community{args.nodes}-d{args.degree}-f{dim}"
    if not (data / "meta.json").is_file():
        start = time.perf_counter()
        ds = community_graph(num_nodes=args.nodes, avg_degree=args.degree, feat_dim=dim, noise=8.0, seed=0)
        save_dataset(ds, data)
        took = time.perf_counter() - start
        print(f"generated {ds.graph.total_nodes:,} nodes, {ds.graph.total_edges:,} edges in {took:.0f} s")
    config, _ = partition_dataset(str(data), str(args.work / f"parts-f{dim}"), 2, "metis")
    return config


def _ratios(rows: list[dict]) -> None:
    """Within each width and repeat: wait/epoch, a GPU cell's epoch over the samplers' and over cpu2's."""
    for r in rows:
        same = {x["cell"]: x for x in rows if x["dim"] == r["dim"] and x["repeat"] == r["repeat"]}
        r["wait_share"] = r.get("wait_s", 0.0) / max(r["epoch_s"], 1e-9) if "wait_s" in r else None
        if r["cell"].startswith("gpu") and "samplers2" in same:
            r["epoch_over_samplers"] = r["epoch_s"] / same["samplers2"]["epoch_s"]
        if "cpu2" in same and r["cell"] != "cpu2":
            r["epoch_over_cpu2"] = r["epoch_s"] / same["cpu2"]["epoch_s"]


def _print(result: dict) -> None:
    mc = result["machine"]
    print(f"machine: {mc['cpu']}, {mc['cores']} cores; GPU: {result['gpu'] or 'none'}; {result['nodes']:,} nodes")
    head = f"{'feat':>4} {'cell':<11}{'epoch s':>8}{'seeds/s':>9}  {'sample/fetch/copy/compute/wait s':<34}"
    print(head + f"{'wait':>6}{'/samplers':>10}{'/cpu2':>7}{'cache':>7}{'acc':>7}")
    for r in result["rows"]:
        split = "/".join(f"{r.get(k, 0.0):.2f}" for k in ("sample_s", "fetch_s", "copy_s", "compute_s", "wait_s"))
        cells = [
            f"{r['wait_share']:.0%}" if r.get("wait_share") is not None else "-",
            f"{r['epoch_over_samplers']:.2f}" if "epoch_over_samplers" in r else "-",
            f"{r['epoch_over_cpu2']:.2f}" if "epoch_over_cpu2" in r else "-",
            f"{r['device_cache_hit_rate']:.0%}" if "device_cache_hit_rate" in r else "-",
            f"{r['test_acc']:.4f}" if "test_acc" in r else "-",
        ]
        seeds = f"{r['seeds_per_s']:,.0f}" if "seeds_per_s" in r else "-"
        print(
            f"{r['dim']:>4} {r['cell']:<11}{r['epoch_s']:>8.2f}{seeds:>9}  {split:<34}"
            f"{cells[0]:>6}{cells[1]:>10}{cells[2]:>7}{cells[3]:>7}{cells[4]:>7}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=1_000_000)
    p.add_argument("--degree", type=int, default=20, help="average degree (directed edges per node)")
    p.add_argument("--dims", default="32,128", help="feature widths, comma-separated")
    p.add_argument("--cells", default=",".join(CELLS), help="cells to run, comma-separated")
    p.add_argument("--epochs", type=int, default=2, help="epochs per cell (the last is reported)")
    p.add_argument("--repeats", type=int, default=1, help="rounds of every cell, interleaved")
    p.add_argument("--batch", type=int, default=1024, help="global batch size")
    p.add_argument("--cache-mb", type=float, default=512.0, help="gpu2+cache: device cache per rank (MB)")
    p.add_argument("--work", type=Path, default=Path("bench-out/gpu"))
    p.add_argument("--json", type=Path, default=Path("bench-out/gpu.json"))
    args = p.parse_args()
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    cells = [c for c in args.cells.split(",") if gpu or not c.startswith("gpu")]
    if not gpu:
        print("no CUDA device: the CPU cells only")
    configs = {dim: _data(args, dim) for dim in (int(d) for d in args.dims.split(","))}
    rows = []
    for repeat in range(args.repeats):
        for dim, config in configs.items():
            for cell in cells:  # interleaved: every cell of a width in each round
                start = time.perf_counter()
                row = run_cell(cell, args, config, args.work) | {"dim": dim, "repeat": repeat}
                row["run_s"] = time.perf_counter() - start
                rows.append(row)
                print(f"  {dim}-d {cell}: epoch {row['epoch_s']:.2f} s ({row['run_s']:.0f} s in all)", flush=True)
    _ratios(rows)
    result = {"machine": machine(), "gpu": gpu, "torch": torch.__version__, "nodes": args.nodes, "rows": rows}
    result["command"] = " ".join(sys.argv)
    _print(result)
    write_result(args.json, result)


if __name__ == "__main__":
    main()

"""Assignment of graphs that need not fit: quality, speed and peak memory of every method on chunked input.

    python benchmarks/scale.py                      # R-MAT scale 21 and cnr-2000, k = 4 and 8
    python benchmarks/scale.py --graphs cnr2000 --parts 4
    python benchmarks/scale.py --big                # R-MAT 24: generate, plan, assign, dispatch, train, embed

Each graph is written once in the chunked format under --work (R-MAT with ``generate rmat --chunked``'s
writer; cnr-2000 from ../shared/data/cnr2000, skipped when absent). Every (graph, method, k) runs
``assign_chunked`` in a fresh process (time and peak RSS, VmHWM, of that process alone). The parent then
reads each assignment and measures, over the graph's edges without self-loops: the edge cut (share of
edges between parts), node balance (largest part / mean) and edge balance (largest in-edge count /
mean). Prints a table and writes JSON (machine named). Run it alone: the timings share 2 cores.

``--big`` runs the whole pipeline on a graph METIS cannot hold here, each step a ``graphshard`` command
whose processes are watched (sampled every 0.1 s, per process) for their peak RSS (VmHWM: private memory
and the resident pages of memory-mapped files), their peak private memory (RssAnon: what must fit) and the
peak disk the run has written: generate R-MAT (``--scale``, default 24; ``--feat-dim``, default 16)
chunked with features and labels, ``graphshard plan`` (its JSON: memory and disk of every step),
``assign`` with ``stream`` and ``kaminpar`` (refused when the planner says it cannot fit: said, not
fatal), ``dispatch`` of the stream assignment to 4 partitions (``--dispatch-procs`` ranks), one epoch of
GraphSAGE on ``--procs`` processes with sampled evaluation and a checkpoint, and ``embed`` of every node;
then the edge cut of the assignments, test accuracy, the sizes on disk, bytes per stored edge of
partition, and the planner's predictions beside the measurements.

    python benchmarks/scale.py --big --scale 25             # issue 28's run: 33.5 M nodes, ~1 B stored edges
    python benchmarks/scale.py --big --scale 24 --feat-dim 64 --procs 2 --assign stream kaminpar
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from partition import machine, peak_rss

from graphshard.plan.measure import process_tree

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
METHODS = ("random", "stream", "kaminpar", "metis")
CLASSES = 8  # --big: R-MAT's planted labels (the checkpoint records the count: embed's planner knows its outputs)


def child(args) -> dict:
    from graphshard.pipeline.assign import assign_chunked

    start = time.perf_counter()
    assign_chunked(args.chunked, args.out, args.k, args.method, fmt="npy", overwrite=True)
    return {"seconds": time.perf_counter() - start, "peak_rss": peak_rss()}


def prepare(name: str, work: Path) -> Path | None:
    """The chunked copy of graph ``name`` (made once)."""
    out = work / name
    if (out / "metadata.json").is_file():
        return out
    if name.startswith("rmat"):
        from graphshard.datasets.rmat_chunked import write_rmat_chunked

        write_rmat_chunked(out, int(name[4:]), 16, 0, num_chunks=8)
        return out
    src = SHARED / name
    if not (src / "meta.json").is_file():
        return None
    from graphshard.chunked.writer import chunk_graph
    from graphshard.datasets import load_dataset

    chunk_graph(load_dataset(src).graph, out, 4, "numpy", graph_name=name)
    return out


def quality(chunked: Path, assignment: Path, k: int) -> dict:
    """Edge cut, node and edge balance of an assignment, streamed over the edge chunks."""
    from graphshard.chunked.load import read_checked_edges
    from graphshard.chunked.spec import read_metadata
    from graphshard.pipeline.assignment_files import read_assignment

    meta = read_metadata(chunked)
    parts, _ = read_assignment(assignment, meta.num_nodes)
    (t,) = meta.ntypes
    p = parts[t]
    cut = edges = 0
    in_edges = np.zeros(k, dtype=np.int64)
    for et in meta.etypes:
        for i in range(len(meta.edges[et].paths)):
            src, dst = read_checked_edges(meta, et, i)
            keep = src != dst
            ps, pd = p[src[keep]], p[dst[keep]]
            cut += int((ps != pd).sum())
            edges += int(keep.sum())
            in_edges += np.bincount(pd, minlength=k)
    sizes = np.bincount(p, minlength=k)
    return {
        "edge_cut": cut / max(1, edges),
        "node_balance": float(sizes.max() / sizes.mean()),
        "edge_balance": float(in_edges.max() / in_edges.mean()),
        "edges": edges,
        "nodes": int(p.shape[0]),
    }


def run(args, name: str, chunked: Path, method: str, k: int) -> dict:
    out = args.work / f"{name}-{method}-{k}"
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--chunked",
        str(chunked),
        "--out",
        str(out),
        "--k",
        str(k),
        "--method",
        method,
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        return {"graph": name, "method": method, "k": k, "error": res.stderr.strip().splitlines()[-1][-300:]}
    row = {"graph": name, "method": method, "k": k, **json.loads(res.stdout.strip().splitlines()[-1])}
    row |= quality(chunked, out, k)
    row["edges_per_s"] = row["edges"] / row["seconds"]
    return row


def warm_up(work: Path) -> None:
    from graphshard.datasets.rmat_chunked import write_rmat_chunked
    from graphshard.pipeline.assign import assign_chunked

    write_rmat_chunked(work / "data", 8, overwrite=True)
    for method in ("stream", "kaminpar"):
        assign_chunked(work / "data", work / method, 2, method, overwrite=True)


def table(rows: list[dict]) -> str:
    head = "| graph | k | method | edge cut | node bal. | edge bal. | time s | M edges/s | peak RSS MB |"
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['graph']} | {r['k']} | {r['method']} | failed: {r['error']} |")
            continue
        lines.append(
            f"| {r['graph']} | {r['k']} | {r['method']} | {100 * r['edge_cut']:.2f} % | "
            f"{r['node_balance']:.3f} | {r['edge_balance']:.2f} | {r['seconds']:.1f} | "
            f"{r['edges_per_s'] / 1e6:.1f} | {r['peak_rss'] / 2**20:,.0f} |"
        )
    return "\n".join(lines)


def watched(cmd: list[str], log: Path, disk_at: Path, disk_base: int) -> dict:
    """Run ``cmd``; its wall time and, per process (by command line), the peak RSS (VmHWM) and the peak
    private memory (RssAnon, sampled), and the peak disk use of the file system of ``disk_at`` above
    ``disk_base`` (bytes used before the benchmark wrote anything)."""
    peaks: dict[int, list] = {}
    disk = 0
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            disk = max(disk, shutil.disk_usage(disk_at).used - disk_base)
            for pid in process_tree(proc.pid):
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                    name = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:80]
                except OSError:
                    continue
                field = {
                    line.split(":")[0]: int(line.split()[1]) * 1024
                    for line in status.splitlines()
                    if line.startswith(("VmHWM", "RssAnon"))
                }
                old = peaks.get(pid, [name, 0, 0])
                peaks[pid] = [name, max(old[1], field.get("VmHWM", 0)), max(old[2], field.get("RssAnon", 0))]
            time.sleep(0.1)
    seconds = time.perf_counter() - start
    top = sorted((p for p in peaks.values() if p[1] > 50 << 20), key=lambda p: -p[1])
    return {
        "cmd": " ".join(cmd),
        "seconds": seconds,
        "returncode": proc.returncode,
        "peak_rss": [p[1] for p in top],
        "peak_private": [p[2] for p in top],
        "processes": [p[0] for p in top],
        "peak_disk": max(disk, shutil.disk_usage(disk_at).used - disk_base),
    }


def du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def predictions(w: Path, data: Path, scale: int, procs: int, dispatch_procs: int) -> dict:
    """The planner's predicted peaks (private memory, bytes) of every step: assign per method, dispatch per
    rank (partitions counted from the stream assignment), train per process (with its mapped files)."""
    from graphshard.chunked.spec import read_metadata
    from graphshard.format.config import read_config
    from graphshard.pipeline.dispatch.cost import counted_estimates
    from graphshard.plan import GraphCounts, estimates
    from graphshard.train.cost import feature_width, train_estimates

    out = {"assign": {e.method: e.peak_bytes for e in estimates(GraphCounts.of(read_metadata(data)), 4)}}
    if (w / "stream" / "partition_meta.json").is_file():
        per_rank = counted_estimates(str(data), str(w / "stream"), 4, dispatch_procs)[0]
        out["dispatch"] = [e.peak_bytes for e in per_rank]
    config = w / "parts" / f"rmat{scale}.json"
    if config.is_file():
        cfg = read_config(config)
        per = train_estimates(cfg, procs, feature_width(cfg), 64, layerwise=False, host_ranks=procs)  # as its guard
        out["train"] = [e.peak_bytes for e in per]
        out["train_mapped"] = [e.mapped_bytes for e in per]
        # embed: layer-wise inference of both layers, the last one CLASSES wide (as train's --num-classes says)
        out["embed"] = [  # as embed's guard counts them: co-located ranks, layer-wise inference alone
            e.peak_bytes
            for e in train_estimates(
                cfg,
                procs,
                feature_width(cfg),
                64,
                layerwise=True,
                layers=2,
                outputs=CLASSES,
                host_ranks=procs,
                training=False,
            )
        ]
    return out


def big_commands(args, w: Path, data: Path) -> dict[str, list[str]]:
    """The steps of the ``--big`` run, each a ``graphshard`` command."""
    gs, config = [sys.executable, "-m", "graphshard.cli"], str(w / "parts" / f"rmat{args.scale}.json")
    every = ["--timeout", "7200"]
    return {
        "generate": [*gs, "generate", "rmat", "--scale", str(args.scale), "--feat-dim", str(args.feat_dim)]
        + ["--num-classes", str(CLASSES), "--chunked", "--num-chunks", "32", "--out", str(data), "--overwrite"],
        "plan": [*gs, "plan", "--dataset", str(data), "--num-parts", "4", "--num-procs", str(args.procs)]
        + ["--out", str(w / "parts"), "--sampled-eval", "--json"],
        **{
            f"assign {m}": [*gs, "-v", "assign", "--dataset", str(data), "--out", str(w / m), "--num-parts", "4"]
            + ["--method", m, "--overwrite"]
            for m in args.assign
        },
        "dispatch": [*gs, "-v", "dispatch", "--dataset", str(data), "--assignment", str(w / "stream")]
        + ["--out", str(w / "parts"), "--num-procs", str(args.dispatch_procs), *every, "--overwrite"],
        # evaluation by sampled batches of the evaluated nodes; the checkpoint is what embed computes from
        "train": [*gs, "train", "--part-config", config, "--num-procs", str(args.procs), "--epochs", "1"]
        + ["--fanouts", "10,10", "--batch-size", "1024", "--eval-fanouts", "10,10", "--num-classes", str(CLASSES)]
        + every
        + ["--checkpoint", str(w / "ckpt"), "--metrics-out", str(w / "train.json")],
        "embed": [*gs, "embed", "--part-config", config, "--checkpoint", str(w / "ckpt"), "--out", str(w / "emb.npy")]
        + ["--num-procs", str(args.procs), *every],
    }


def big(args) -> None:
    w = args.work / f"big-rmat{args.scale}"
    w.mkdir(parents=True, exist_ok=True)
    data, steps = w / "data", {}
    base = shutil.disk_usage(w).used - sum(
        du(w / d) for d in ("data", "parts", "stream", "kaminpar") if (w / d).is_dir()
    )
    for name, cmd in big_commands(args, w, data).items():
        if name in args.skip:
            continue
        steps[name] = watched(cmd, w / f"{name.replace(' ', '-')}.log", w, base)
        print(
            f"{name}: {steps[name]['seconds']:.0f} s, peak RSS {[round(b / 2**30, 2) for b in steps[name]['peak_rss']]}"
            f" GiB, private {[round(b / 2**30, 2) for b in steps[name]['peak_private']]} GiB, "
            f"disk {steps[name]['peak_disk'] / 1e9:.1f} GB, exit {steps[name]['returncode']}",
            flush=True,
        )
        if name == "plan" and steps[name]["returncode"] == 0:
            steps[name]["plan"] = json.loads((w / "plan.log").read_text())
        if steps[name]["returncode"] != 0 and name != "assign kaminpar":  # kaminpar may be refused: said, not fatal
            break
    for method in args.assign:
        if (w / method / "partition_meta.json").is_file() and f"assign {method}" in steps:
            steps[f"assign {method}"] |= quality(data, w / method, 4)
    if (w / "train.json").is_file():
        steps.setdefault("train", {})["metrics"] = json.loads((w / "train.json").read_text())
    sizes = {d: du(w / d) for d in ("data", "parts", "emb.npy") if (w / d).exists()}
    parts = w / "parts" / f"rmat{args.scale}.json"
    if parts.is_file():
        from graphshard.format.config import read_config
        from graphshard.format.tensorfile import read_header

        cfg = read_config(parts)
        stored = sum(int(read_header(cfg.part_path(p, "part_graph"))["indices"]["shape"][0]) for p in range(4))
        sizes["stored_edges"] = stored
        sizes["bytes_per_stored_edge"] = sizes["parts"] / stored
    result = {
        "machine": machine(),
        "scale": args.scale,
        "feat_dim": args.feat_dim,
        "steps": steps,
        "disk_bytes": sizes,
        "predicted": predictions(w, data, args.scale, args.procs, args.dispatch_procs),
        "wall_s": sum(s.get("seconds", 0) for s in steps.values()),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    (args.json.parent / f"scale-big-{args.scale}.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--graphs", nargs="+", default=["rmat21", "cnr2000"])
    p.add_argument("--parts", type=int, nargs="+", default=[4, 8])
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--work", type=Path, default=Path("bench-out/scale"))
    p.add_argument("--json", type=Path, default=Path("bench-out/scale.json"))
    p.add_argument("--big", action="store_true", help="the whole pipeline on one large R-MAT graph")
    p.add_argument("--scale", type=int, default=24, help="--big: R-MAT scale")
    p.add_argument("--skip", nargs="*", default=[], help="--big: steps already done")
    p.add_argument("--feat-dim", type=int, default=16, help="--big: feature width (the R-MAT 24 run used 64)")
    p.add_argument("--procs", type=int, default=4, help="--big: training and embed processes")
    p.add_argument("--dispatch-procs", type=int, default=2, help="--big: dispatch ranks")
    p.add_argument("--assign", nargs="+", default=["stream", "kaminpar"], help="--big: assignment methods")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--chunked", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--k", type=int, help=argparse.SUPPRESS)
    p.add_argument("--method", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    if args.big:
        big(args)
        return
    warm_up(args.work / "warm-up")  # kernels compiled before anything is timed
    rows = []
    for name in args.graphs:
        chunked = prepare(name, args.work)
        if chunked is None:
            print(f"skipping {name}: not in {SHARED}")
            continue
        for k in args.parts:
            for method in args.methods:
                rows.append(run(args, name, chunked, method, k))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
    print("\n" + table(rows))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"machine": machine(), "rows": rows}, indent=1))
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()

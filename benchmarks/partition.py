"""Benchmark of in-memory partitioning (issue 2) on an R-MAT graph.

Runs, each in a fresh process so peak RSS is its own: ``partition_graph`` end to end with
``random``, ``metis`` and ``kaminpar``; and pymetis and KaMinPar called directly on the same
undirected CSR. Prints a table and writes JSON.

    python benchmarks/partition.py --scale 20 --edge-factor 16 --feat-dim 64 --parts 4

The dataset is generated once into --data (default bench-out/rmat<scale>) and reused.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

DGL_SECONDS = {"metis": 74.0, "random": 41.0}  # DGL 2.1 partition_graph on this graph and machine (issue 2)


def peak_rss() -> int:
    from graphshard.progress import peak_rss_bytes  # VmHWM: ru_maxrss would include the parent's peak

    return peak_rss_bytes()


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    mem = next((int(line.split()[1]) * 1024 for line in open("/proc/meminfo") if line.startswith("MemTotal")), 0)
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_bytes": mem, "python": platform.python_version()}


def write_result(path: Path, result: dict) -> None:
    """``result`` as indented JSON at ``path`` (its folder made first)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))


def input_bytes(g) -> int:
    total = sum(s.nbytes + d.nbytes for s, d in g.edges.values())
    return total + sum(a.nbytes for feats in g.node_feats.values() for a in feats.values())


# -- child processes -----------------------------------------------------------------------------
def child_end_to_end(args) -> dict:
    from graphshard import partition_graph
    from graphshard.datasets import load_dataset

    records = []

    class Capture(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logging.getLogger("graphshard").addHandler(Capture())
    logging.getLogger("graphshard").setLevel(logging.INFO)
    g = load_dataset(args.data).graph
    out = Path(args.work) / args.method
    shutil.rmtree(out, ignore_errors=True)  # time a first run into an empty directory
    start = time.perf_counter()
    partition_graph(g, "bench", args.parts, out, part_method=args.method, seed=0)
    seconds = time.perf_counter() - start
    rss = peak_rss()
    from graphshard.stats import partitioning_stats  # loads torch: only after the timed run

    phases = {m.group(1): float(m.group(2)) for m in (re.match(r"(\S+): ([\d.]+) s", r) for r in records) if m}
    inside = [float(m.group(1)) for m in (re.search(r"partitioner call: ([\d.]+) s", r) for r in records) if m]
    st = partitioning_stats(out / "bench.json")
    return {
        "seconds": seconds,
        "peak_rss": rss,
        "input_bytes": input_bytes(g),
        "phases": phases,
        "partitioner_seconds": inside[0] if inside else 0.0,
        "edge_cut": st.edge_cut,
        "edge_cut_fraction": st.edge_cut_fraction,
        "node_balance": st.node_balance,
        "edge_balance": st.edge_balance,
        "output_bytes": st.total_file_bytes,
    }


def child_bare(args) -> dict:
    import numpy as np

    from graphshard.datasets import load_dataset
    from graphshard.partition.assign.adjacency import undirected_csr

    g = load_dataset(args.data).graph
    src, dst = g.edges[("_N", "_E", "_N")]
    csr = undirected_csr(src, dst, g.num_nodes["_N"])
    del g, src, dst
    before = peak_rss()
    start = time.perf_counter()
    if args.method == "pymetis":
        import pymetis

        opts = pymetis.Options(seed=0)  # the seed partition_graph passes, so both calls do the same work
        _, parts = pymetis.part_graph(
            args.parts, pymetis.CSRAdjacency(csr.xadj, csr.adjncy), recursive=False, options=opts
        )
    else:
        from graphshard.partition.assign.kaminpar import kaminpar_partition

        parts = kaminpar_partition(lambda: csr, args.parts)
    seconds = time.perf_counter() - start
    parts = np.asarray(parts)
    rows = np.repeat(np.arange(csr.num_nodes), np.diff(csr.xadj))
    cut = int((parts[rows] != parts[csr.adjncy]).sum()) // 2
    return {
        "seconds": seconds,
        "peak_rss": peak_rss(),
        "rss_before_call": before,
        "undirected_cut": cut,
        "csr_bytes": csr.xadj.nbytes + csr.adjncy.nbytes,
    }


def run_child(kind: str, method: str, args) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        kind,
        "--method",
        method,
        "--data",
        str(args.data),
        "--parts",
        str(args.parts),
        "--work",
        str(args.work),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"{kind} {method} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def warm_up() -> None:
    """Compile (and cache) the numba kernels on a tiny graph so timings exclude JIT compilation."""
    import tempfile

    from graphshard import partition_graph
    from graphshard.datasets import community_graph

    g = community_graph(num_nodes=2000, seed=0).graph
    with tempfile.TemporaryDirectory() as tmp:
        for m in ("random", "metis", "kaminpar"):
            partition_graph(g, "w", 2, Path(tmp) / m, part_method=m)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=int, default=20)
    p.add_argument("--edge-factor", type=int, default=16)
    p.add_argument("--feat-dim", type=int, default=64)
    p.add_argument("--parts", type=int, default=4)
    p.add_argument("--data", type=Path, help="dataset directory (generated if missing)")
    p.add_argument("--work", type=Path, default=Path("bench-out/partition"), help="where partitions are written")
    p.add_argument("--json", type=Path, default=Path("bench-out/partition.json"), help="results file")
    p.add_argument("--methods", default="random,metis,kaminpar")
    p.add_argument("--skip-bare", action="store_true", help="do not run the bare partitioner calls")
    p.add_argument("--child", choices=["e2e", "bare"], help=argparse.SUPPRESS)
    p.add_argument("--method", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child_end_to_end(args) if args.child == "e2e" else child_bare(args)))
        return

    args.data = args.data or Path(f"bench-out/rmat{args.scale}")
    if not (args.data / "meta.json").is_file():
        from graphshard.datasets import rmat_graph, save_dataset

        t = time.perf_counter()
        save_dataset(rmat_graph(args.scale, args.edge_factor, args.feat_dim, seed=0), args.data)
        print(f"generated {args.data} in {time.perf_counter() - t:.1f} s")
    warm_up()
    results = {
        "machine": machine(),
        "graph": {"scale": args.scale, "edge_factor": args.edge_factor, "feat_dim": args.feat_dim},
        "parts": args.parts,
        "end_to_end": {},
        "bare": {},
    }
    for m in args.methods.split(","):
        results["end_to_end"][m] = run_child("e2e", m, args)
        print(f"{m}: {results['end_to_end'][m]['seconds']:.1f} s", flush=True)
    if not args.skip_bare:
        for m in ("pymetis", "kaminpar"):
            results["bare"][m] = run_child("bare", m, args)
            print(f"bare {m}: {results['bare'][m]['seconds']:.1f} s", flush=True)
    results["targets"] = targets(results)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1))
    print_table(results)
    print(f"\nwrote {args.json}")


def targets(r: dict) -> dict:
    e2e, bare, out = r["end_to_end"], r["bare"], {}
    if "metis" in e2e and "pymetis" in bare:
        extra = e2e["metis"]["seconds"] - bare["pymetis"]["seconds"]
        out["metis_overhead_vs_bare_pymetis"] = {"value": extra / bare["pymetis"]["seconds"], "target": 0.3}
    if "random" in e2e:
        out["random_vs_dgl_random"] = {"value": e2e["random"]["seconds"] / DGL_SECONDS["random"], "target": 0.15}
    if "kaminpar" in e2e:
        out["kaminpar_vs_dgl_metis"] = {"value": e2e["kaminpar"]["seconds"] / DGL_SECONDS["metis"], "target": 0.25}
    for m, res in e2e.items():
        own = res["input_bytes"] * 2.5
        partner = bare.get("pymetis" if m == "metis" else m, {}).get("peak_rss", 0)
        limit = max(own, partner)
        out[f"{m}_peak_rss_vs_limit"] = {"value": res["peak_rss"] / limit, "target": 1.0}
    for v in out.values():
        v["ok"] = v["value"] <= v["target"]
    return out


def print_table(r: dict) -> None:
    gb = 2**30
    print(
        f"\nmachine: {r['machine']['cpu']}, {r['machine']['cores']} cores, {r['machine']['memory_bytes'] / gb:.0f} GiB"
    )
    head = f"{'run':<18}{'time s':>9}{'partitioner s':>15}{'peak RSS GiB':>14}{'edge cut %':>12}"
    head += f"{'node bal':>10}{'edge bal':>10}{'output GB':>11}"
    print(head)
    for m, x in r["end_to_end"].items():
        print(
            f"{'e2e ' + m:<18}{x['seconds']:>9.2f}{x['partitioner_seconds']:>15.2f}{x['peak_rss'] / gb:>14.2f}"
            f"{100 * x['edge_cut_fraction']:>12.2f}{x['node_balance']:>10.3f}{x['edge_balance']:>10.3f}"
            f"{x['output_bytes'] / 1e9:>11.2f}"
        )
    for m, x in r["bare"].items():
        cut = 100 * x["undirected_cut"] * 2 / max(1, x["csr_bytes"] // 8)
        print(f"{'bare ' + m:<18}{x['seconds']:>9.2f}{x['seconds']:>15.2f}{x['peak_rss'] / gb:>14.2f}{cut:>12.2f}")
    print("\ntargets:")
    for name, v in r["targets"].items():
        print(f"  {name:<36} {v['value']:.3f} (target <= {v['target']})  {'OK' if v['ok'] else 'MISSED'}")


if __name__ == "__main__":
    main()

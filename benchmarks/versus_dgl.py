"""graphshard's training epoch side by side with DGL 2.1's, in one run of the machine, interleaved.

    sudo python benchmarks/versus_dgl.py --dgl ~/.cache/dglenv/bin/python \\
        [--nodes 1000000] [--dims 32,128] [--cells one,2x1,2x1@10gbit,2x1@1gbit,busy] [--repeats 1]

For each feature width it generates ``benchmarks/train.py``'s community graph (``--nodes`` nodes, about
``--degree`` x as many directed edges) as a dataset directory, partitions it into 2 parts with METIS by each
tool (graphshard's ``partition_dataset``; DGL's ``partition_graph`` through
``../shared/anchors/dgl/run_dgl_dist_train.py``), then runs the cells, each as ``graphshard train`` then
DGL's distributed GraphSAGE (its own example model, a server + a trainer per machine, the graph in shared
memory), ``--repeats`` times, A B A B. Both train 2 epochs, fanouts 10,10, global batch 1024, hidden 64;
the figure is the second epoch's wall time (per-rank means of sampling / fetch / compute / sync beside it).

Cells: ``one`` is one host, 2 ranks on both cores (``graphshard train --num-procs 2``; DGL: 2 machines on
127.0.0.1). ``HxR[@RATE]`` is H emulated hosts of R ranks each (network namespaces, see
tests/cluster/harness.py; one core per host, links capped at RATE by a token bucket, behind which packets
wait in this kernel's default queue, as behind a network card, or with ``--link-queue fifo`` in one first-in
first-out queue), each holding only its own partitions; DGL's anchor runs 2 machines of 1 trainer, so it has
no figure for other layouts.
``busy`` is ``one`` with one busy-looping process pinned to each core for the whole run of both tools.
``+bf16`` after a cell adds graphshard with ``--wire-dtype bfloat16`` (DGL has no such option); ``+rpc`` adds
graphshard with ``--no-colocated`` (ranks of one host ask each other over RPC instead of reading each other's
partition files in-process; it changes nothing across emulated hosts, which hold their own copies).

Without ``--dgl`` only graphshard runs. Needs root for the emulated hosts. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from partition import machine, write_result  # noqa: E402

from tests.cluster.harness import Cluster, down_on_sigterm, link_queue, unavailable  # noqa: E402
from tests.cluster.jobs import finish, spread, start  # noqa: E402

ANCHOR = ROOT.parent / "shared" / "anchors" / "dgl" / "run_dgl_dist_train.py"
SPLIT = ("sample_s", "fetch_s", "compute_s", "comm_s")
# further graphshard runs a cell may add: the flags they add to the same command
VARIANTS = {"bf16": ["--wire-dtype", "bfloat16"], "rpc": ["--no-colocated"]}


@dataclass(frozen=True)
class Cell:
    """One column of conditions: ``hosts`` x ``ranks`` (0 hosts: one plain host), link ``rate``, ``busy``
    cores, and the further graphshard runs (``variants``: ``bf16``, ``rpc``; see :data:`VARIANTS`)."""

    name: str
    hosts: int = 0
    ranks: int = 2
    rate: str | None = None
    busy: bool = False
    variants: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Cell:
        core, *variants = text.split("+")
        if any(v not in VARIANTS for v in variants):
            raise SystemExit(f"cell {text!r}: variants are {', '.join('+' + v for v in VARIANTS)}")
        if core in ("one", "busy"):
            return cls(text, busy=core == "busy", variants=tuple(variants))
        m = re.fullmatch(r"(\d+)x(\d+)(?:@(\w+))?", core)
        if not m:
            raise SystemExit(f"cell {text!r}: one, busy, or HOSTSxRANKS[@RATE] (e.g. 2x1@1gbit), optionally +bf16/+rpc")
        return cls(text, int(m[1]), int(m[2]), m[3], variants=tuple(variants))

    @property
    def dgl_runs(self) -> bool:
        return self.hosts == 0 or (self.hosts, self.ranks) == (2, 1)


def _epoch(record: dict, keys: dict[str, str]) -> dict:
    return {k: float(record[v]) for k, v in keys.items()}


def _run(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    """Run ``cmd`` with its output in ``log`` (replaced each run); a failure ends the benchmark with the log's
    last lines, not a bare exit status."""
    with log.open("w") as out:
        code = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=3600).returncode
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise SystemExit(f"{' '.join(cmd[:4])} ... exited with {code}; the end of {log}:\n{tail}")


def _ours(args, configs: dict[int, Path], cell: Cell, extra: list[str]) -> dict:
    metrics = args.work / "ours.json"
    metrics.unlink(missing_ok=True)
    common = [
        "--epochs",
        "2",
        "--eval-every",
        "0",
        "--fanouts",
        "10,10",
        "--batch-size",
        "1024",
        "--hidden",
        "64",
        "--timeout",
        "900",
        *extra,
    ]
    if cell.hosts == 0:
        cmd = [
            sys.executable,
            "-m",
            "graphshard.cli",
            "train",
            "--part-config",
            str(configs[2]),
            "--num-procs",
            "2",
            *common,
            "--metrics-out",
            str(metrics),
        ]
        _run(cmd, args.work / "ours.log")
        m = json.loads(metrics.read_text())
    else:
        parts = cell.hosts * cell.ranks
        c = Cluster(args.work / "cluster", cell.hosts, cell.rate, 1, args.link_queue).up()
        try:
            mine = spread(
                configs[parts], c, [list(range(h * cell.ranks, (h + 1) * cell.ranks)) for h in range(cell.hosts)]
            )
            finish(
                start(
                    c,
                    ["train", "--part-config", mine, *common, "--metrics-out", "m.json"],
                    per_host=cell.ranks,
                    name="ours",
                ),
                timeout=3600,
            )
            m = json.loads((c.hosts[0].workdir / "m.json").read_text())
        finally:
            c.down()
    last = m["epochs"][-1]
    return {
        "epoch_s": last["wall_s"],
        **_epoch(last, {k: k for k in SPLIT}),
        "test_acc": m["test_acc"],
        "fetch_mb": last["fetch_bytes"] / 1e6,
    }


def _dgl(args, dgl_config: Path, cell: Cell, tag: str) -> dict:
    env = {
        **os.environ,
        "DGLBACKEND": "pytorch",
        "ANCHOR_RESULTS": str(args.work / "dgl-results"),
        "ANCHOR_LOGS": str(args.work / "dgl-logs"),
    }
    cmd = [
        args.dgl,
        str(ANCHOR),
        "launch",
        str(dgl_config),
        tag,
        "--graph-shm",
        "--epochs",
        "2",
        "--fanouts",
        "10,10",
        "--batch",
        "1024",
        "--hidden",
        "64",
    ]
    c = None
    if cell.hosts:
        c = Cluster(args.work / "cluster", cell.hosts, cell.rate, 1, args.link_queue).up()
        env["ANCHOR_NETNS"] = c.prefix  # the anchor's machine i is namespace <prefix>h<i> at 198.18.0.<i+1>
    try:
        _run(cmd, args.work / "dgl.log", env)
    finally:
        if c is not None:
            c.down()
    agg = json.loads((args.work / "dgl-results" / f"dist_train_{tag}.json").read_text())
    last = agg["epochs"][-1]
    return {
        "epoch_s": last["wall_s_mean"],
        **_epoch(last, {k: f"{k}_mean" for k in SPLIT}),
        "test_acc": agg["test_acc"],
        "fetch_mb": last["fetch_bytes_remote_total"] / 1e6,
    }


class _Busy:
    """One busy-looping process pinned to each core, for the duration of a ``with`` block."""

    def __init__(self, on: bool):
        self.on, self.procs = on, []

    def __enter__(self) -> _Busy:
        if self.on:
            self.procs = [
                subprocess.Popen(["taskset", "-c", str(i), sys.executable, "-c", "while True: pass"])
                for i in range(os.cpu_count() or 1)
            ]
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            p.kill()
            p.wait(10)


def _prepare(args, dim: int) -> tuple[dict[int, Path], Path | None]:
    from graphshard.datasets import community_graph, save_dataset
    from graphshard.train.run import partition_dataset

    data = args.work / f"community{args.nodes}-d{args.degree}-f{dim}"
    if not (data / "meta.json").is_file():
        save_dataset(
            community_graph(num_nodes=args.nodes, avg_degree=args.degree, feat_dim=dim, noise=8.0, seed=0), data
        )
    parts = {2} | {c.hosts * c.ranks for c in args.cells if c.hosts}
    configs = {p: Path(partition_dataset(str(data), str(args.work / f"ours-f{dim}-{p}"), p, "metis")[0]) for p in parts}
    dgl_config = None
    if args.dgl:
        dgl_config = args.work / f"dgl-f{dim}" / "community.json"
        if not dgl_config.is_file():
            subprocess.run(
                [args.dgl, str(ANCHOR), "partition", str(data), str(dgl_config.parent), "community"],
                check=True,
                env={**os.environ, "DGLBACKEND": "pytorch"},
                stdout=subprocess.DEVNULL,
            )
    return configs, dgl_config


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dgl", help="python of a DGL 2.1 environment (../shared/anchors/dgl/setup.sh builds one)")
    p.add_argument("--nodes", type=int, default=1_000_000)
    p.add_argument("--degree", type=int, default=20)
    p.add_argument("--dims", default="32,128", help="feature widths, comma-separated")
    p.add_argument(
        "--cells",
        default="one,2x1,2x1@10gbit,2x1@1gbit,busy",
        help="comma-separated: one, busy, HOSTSxRANKS[@RATE], each optionally +bf16 and/or +rpc",
    )
    p.add_argument("--repeats", type=int, default=1, help="A B rounds per cell")
    p.add_argument(
        "--order",
        choices=("cells", "rounds"),
        default="cells",
        help="cells: each cell's rounds one after the other; rounds: every cell once per round, so that cells can "
        "be compared with each other side by side too (e.g. 128-d at 1 Gbit/s against unshaped)",
    )
    p.add_argument(
        "--link-queue",
        default="host",
        help="the queue behind a capped link's token bucket: host (this kernel's default, net.core.default_qdisc, "
        "as a network card's), fifo (the bucket's own) or a qdisc's name",
    )
    p.add_argument("--work", type=Path, default=Path("bench-out/versus-dgl"))
    p.add_argument("--json", type=Path, default=Path("bench-out/versus-dgl.json"))
    args = p.parse_args()
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    args.cells = [Cell.parse(c) for c in args.cells.split(",")]
    if any(c.hosts for c in args.cells):
        if reason := unavailable():
            sys.exit(f"benchmarks/versus_dgl.py: {reason}")
        down_on_sigterm()  # a terminated benchmark removes its hosts, as an interrupted one does
    rows = []
    for dim in (int(d) for d in args.dims.split(",")):
        configs, dgl_config = _prepare(args, dim)
        for cell, rep in _schedule(args.cells, args.repeats, args.order):
            with _Busy(cell.busy):
                runs = {"graphshard": _ours(args, configs, cell, [])}
                for v in cell.variants:
                    runs[f"graphshard {v}"] = _ours(args, configs, cell, VARIANTS[v])
                if dgl_config is not None and cell.dgl_runs:
                    runs["DGL 2.1"] = _dgl(args, dgl_config, cell, f"f{dim}-{cell.name.replace('@', '-')}-{rep}")
            for system, r in runs.items():
                rows.append({"dim": dim, "cell": cell.name, "repeat": rep, "system": system, **r})
                print(f"  {dim}-d {cell.name:<14} {system:<16} epoch {r['epoch_s']:6.2f} s", flush=True)
    result = {
        "machine": machine(),
        "nodes": args.nodes,
        "degree": args.degree,
        "link_queue": link_queue(args.link_queue),
        "rows": rows,
    }
    write_result(args.json, result)
    _print(result)
    print(f"wrote {args.json}")


def _schedule(cells: list, repeats: int, order: str) -> list:
    """(cell, round) in the order they run: each cell's rounds in turn, or every cell once per round."""
    if order == "rounds":
        return [(cell, rep) for rep in range(repeats) for cell in cells]
    return [(cell, rep) for cell in cells for rep in range(repeats)]


def _print(result: dict) -> None:
    mc = result["machine"]
    print(
        f"machine: {mc['cpu']}, {mc['cores']} cores; community graph {result['nodes']:,} nodes, degree "
        f"{result['degree']}; METIS 2 parts; fanouts 10,10, global batch 1024, hidden 64; 2nd epoch; capped links "
        f"queue in {result['link_queue']}"
    )
    print(
        f"{'feat':>5} {'cell':<14} {'system':<16}{'epoch s':>8}  {'sample/fetch/compute/sync s':<28}"
        f"{'remote MB':>10}{'test acc':>9}{'ratio':>7}"
    )
    dgl = {(r["dim"], r["cell"], r["repeat"]): r["epoch_s"] for r in result["rows"] if r["system"] == "DGL 2.1"}
    for r in result["rows"]:
        split = "/".join(f"{r[k]:.1f}" for k in SPLIT)
        other = dgl.get((r["dim"], r["cell"], r["repeat"]))
        ratio = f"{r['epoch_s'] / other:.2f}" if other and r["system"] != "DGL 2.1" else ""
        print(
            f"{r['dim']:>5} {r['cell']:<14} {r['system']:<16}{r['epoch_s']:>8.2f}  {split:<28}{r['fetch_mb']:>10.0f}"
            f"{r['test_acc']:>9.4f}{ratio:>7}"
        )
    _print_against_unshaped(result["rows"])


def _print_against_unshaped(rows: list[dict]) -> None:
    """Each capped cell's epoch over the same hosts' unshaped one, round by round (side by side only when the
    cells ran in rounds: ``--order rounds``)."""
    epoch = {(r["dim"], r["cell"], r["system"], r["repeat"]): r["epoch_s"] for r in rows}
    for (dim, cell, system, rep), t in epoch.items():
        if "@" in cell and (base := epoch.get((dim, cell.split("@")[0], system, rep))):
            print(f"{dim:>5} {cell:<14} {system:<16} round {rep}: {t / base:.2f} x its unshaped epoch")


if __name__ == "__main__":
    main()

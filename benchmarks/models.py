"""Accuracy of every built-in model against an independent full-batch PyG reference, per dataset.

    python benchmarks/models.py [--models sage,gcn] [--datasets cora,dblp_hetero] [--epochs 200] [--seeds 3]
    python benchmarks/models.py --quick          # Cora, 30 epochs: a check in a minute or two

For every model x dataset, graphshard trains through its command line (``graphshard train --dataset DIR
--num-procs 2 --model M --metrics-out FILE``: 2 processes, 2 METIS partitions, mini-batches of ``--batch-size``
seeds, ``--fanouts`` neighbours sampled per layer) and the figure is its test accuracy at the best validation
epoch, read from the metrics file. The reference is the same architecture written here with
``torch_geometric.nn`` layers and trained full-batch in this process on the unpartitioned graph, read from the
dataset directory by this file's own NumPy reader (not graphshard's): same hidden width, layers, dropout,
heads, Adam learning rate and weight decay, epochs, the dataset's own train/validation/test split, and test
accuracy at the best validation epoch (the first of equals). Node types without features (PubMed has none;
DBLP's conferences) get learnt input embeddings of ``--hidden`` columns in both (uniform in +-1/sqrt(width),
Adagrad at ``--sparse-lr``, as graphshard's). Heterogeneous graphs get a reverse relation ``rev_<r>`` per
relation in both (graphshard adds them itself). Each figure is the mean over ``--seeds`` seeds (default 1;
a single seed's test accuracy on these 1000-node test sets moves by about a point from seed to seed).

Models: homogeneous ``sage`` (SAGEConv, mean), ``gcn`` (GCNConv), ``gat`` (GATConv, ``--heads`` heads
concatenated in hidden layers, one averaged head out), ``gin`` (GINConv of a 2-layer MLP), ``mlp``; on DBLP
(target type ``author``) ``rsage`` (HeteroConv of SAGEConv per relation, averaged over relations), ``rgcn``
(PyG's RGCNConv on the type-stacked graph: a weight per relation, mean per relation, summed, plus one root
weight shared by all types, where graphshard has one per type), ``rgat`` (HeteroConv of GATConv per relation,
no self-loops, summed, plus a linear root per type; hidden layers concatenate the heads, the last averages
them), ``hgt`` (HGTConv layers ``--hidden`` wide, then a linear map to the classes) and ``mlp`` (the author
features only). Heterogeneous models first project every type's input to ``--hidden`` with a linear map of
its own. A model graphshard does not offer is
"not available" in the table (``rsage`` runs graphshard's ``sage``, which is the relational GraphSAGE on a
heterogeneous graph, until graphshard names it ``rsage``).

Defaults (hidden 64, 2 layers, dropout 0.5, lr 0.01, weight decay 5e-4, 200 epochs) are the usual ones for
these citation graphs. graphshard's mini-batch: 32 seeds (5 steps per epoch on Cora's 140 training nodes, 2 on
PubMed's 60) and fanouts 10,10 (its default); its validation and test use every neighbour. Epoch times are
the median over the epochs after the first: graphshard's is a training epoch's wall time per rank (sampling,
fetching, compute, gradient sync), the reference's one full-batch step (forward, backward, optimiser) on
``--threads`` torch threads (1: a core, as each graphshard rank has); both are noisy where other processes
share the cores. Prints a table and writes JSON naming the machine.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GATConv, GCNConv, GINConv, HeteroConv, HGTConv, RGCNConv, SAGEConv

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from partition import machine, write_result  # noqa: E402

HOMO_MODELS = ("sage", "gcn", "gat", "gin", "mlp")
HETERO_MODELS = ("rsage", "rgcn", "rgat", "hgt", "mlp")
DATASETS = {"cora": HOMO_MODELS, "citeseer": HOMO_MODELS, "pubmed": HOMO_MODELS, "dblp_hetero": HETERO_MODELS}
FALLBACK = {"rsage": "sage"}  # graphshard's sage on a heterogeneous graph is the relational GraphSAGE
ETYPE = tuple[str, str, str]
NOTES = (
    "Accuracy: test accuracy at the best validation epoch, mean over the seeds. Epoch times are noisy: other "
    "processes share the machine's cores. graphshard: 2 processes x 2 METIS partitions, mini-batches, median "
    "training-epoch wall time per rank; reference: one process on --threads torch threads, full batch, plain "
    "PyG, median time of one training step."
)


@dataclass(frozen=True)
class Settings:
    """What both sides train with."""

    hidden: int = 64
    layers: int = 2
    dropout: float = 0.5
    heads: int = 4
    lr: float = 0.01
    weight_decay: float = 5e-4
    sparse_lr: float = 0.05
    epochs: int = 200
    fanouts: tuple[int, ...] = (10, 10)
    batch_size: int = 32
    seeds: int = 1


# -- the reference's own reader of the dataset directory ---------------------------------------------------
@dataclass
class Data:
    """A dataset as the reference trains on it. ``x``: per node type, a dense float array, a CSR triple
    ``(indptr, indices, data, columns)`` or None (no features); ``edges``: per relation, a (2, E) array
    of (source, destination) IDs local to their types. A homogeneous graph has the one type ``_N``."""

    name: str
    num_nodes: dict[str, int]
    x: dict[str, Any]
    edges: dict[ETYPE, np.ndarray]
    y: np.ndarray
    split: dict[str, np.ndarray]
    target: str
    num_classes: int

    @property
    def hetero(self) -> bool:
        return len(self.num_nodes) > 1


def _npy(path: Path) -> np.ndarray:
    return np.load(path, allow_pickle=False)


def _features(d: Path, fmt: str, files: list[str], shape: list[int] | None) -> Any:
    """Dense array, CSR ``(indptr, indices, data, columns)`` or None, as ``meta.json`` describes them."""
    if fmt == "dense":
        return _npy(d / files[0]).astype(np.float32)
    if fmt == "csr":
        indptr, indices, data = (_npy(d / f) for f in files)
        return indptr.astype(np.int64), indices.astype(np.int64), data.astype(np.float32), int(shape[1])
    return None


def _splits(d: Path, prefix: str) -> dict[str, np.ndarray]:
    return {s: _npy(d / f"{prefix}{s}_idx.npy").astype(np.int64).reshape(-1) for s in ("train", "val", "test")}


def read_data(d: Path) -> Data:
    """The dataset directory ``d`` (``meta.json`` + ``.npy`` arrays), homogeneous or heterogeneous."""
    meta = json.loads((d / "meta.json").read_text())
    if meta.get("kind") == "heterogeneous":
        return _read_hetero(d, meta)
    n = int(meta["num_nodes"])
    x = _features(d, meta.get("feat_format", "none"), meta.get("feat_files", []), meta.get("feat_shape"))
    edges = np.stack([_npy(d / "src.npy"), _npy(d / "dst.npy")]).astype(np.int64)
    y = _npy(d / "label.npy").astype(np.int64)
    return Data(
        meta.get("name", d.name),
        {"_N": n},
        {"_N": x},
        {("_N", "_E", "_N"): edges},
        y,
        _splits(d, ""),
        "_N",
        int(meta["num_classes"]),
    )


def _read_hetero(d: Path, meta: dict[str, Any]) -> Data:
    """Every relation and its reverse ``rev_<relation>`` (relations are stored one way only)."""
    edges: dict[ETYPE, np.ndarray] = {}
    for text in meta["edge_types"]:
        s, r, t = text.split(":")
        e = _npy(d / "edges" / f"{s}__{r}__{t}.npy").astype(np.int64)
        edges[(s, r, t)] = e
        if s != t:
            edges[(t, f"rev_{r}", s)] = e[::-1].copy()
    feats = meta.get("features", {})
    x = {
        t: _features(
            d, feats.get(t, {}).get("format", "none"), feats.get(t, {}).get("files", []), feats.get(t, {}).get("shape")
        )
        for t in meta["node_types"]
    }
    target = meta["target_node_type"]
    y = _npy(d / meta["label_files"][target]).astype(np.int64)
    return Data(
        meta.get("name", d.name),
        {t: int(n) for t, n in meta["num_nodes"].items()},
        x,
        edges,
        y,
        _splits(d, f"{target}_"),
        target,
        int(meta["num_classes"]),
    )


# -- reference models (plain PyG layers, full batch) ----------------------------------------------------------
def _torch_x(x: Any, sparse: bool) -> torch.Tensor | None:
    """A torch tensor of features: dense, or (``sparse``) a COO matrix for a CSR triple; None stays None."""
    if x is None or not isinstance(x, tuple):
        return None if x is None else torch.from_numpy(x)
    indptr, indices, data, cols = x
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    coo = torch.sparse_coo_tensor(
        torch.from_numpy(np.stack([rows, indices])),
        torch.from_numpy(data),
        (len(indptr) - 1, cols),
        check_invariants=False,
    ).coalesce()
    return coo if sparse else coo.to_dense()


class Inputs(nn.Module):
    """Every node type's input rows: its features, or a learnt embedding of ``hidden`` columns (uniform in
    +-1/sqrt(hidden)) where it has none."""

    def __init__(self, data: Data, hidden: int):
        super().__init__()
        self.fixed = {t: _torch_x(v, data.hetero) for t, v in data.x.items() if v is not None}
        bound = 1.0 / hidden**0.5
        self.embeddings = nn.ParameterDict(
            {
                t: nn.Parameter(torch.empty(n, hidden).uniform_(-bound, bound))
                for t, n in data.num_nodes.items()
                if data.x[t] is None
            }
        )

    def forward(self) -> dict[str, torch.Tensor]:
        return {**self.fixed, **dict(self.embeddings.items())}


def _activate(x: Any, p: float, training: bool) -> Any:
    """ReLU then dropout, on a tensor or on every tensor of a dictionary."""
    if isinstance(x, dict):
        return {t: F.dropout(F.relu(v), p, training) for t, v in x.items()}
    return F.dropout(F.relu(x), p, training)


class Stack(nn.Module):
    """``layers`` in turn (each called as ``layer(x, *graph)``), ReLU and dropout between them."""

    def __init__(self, layers: list[nn.Module], dropout: float):
        super().__init__()
        self.layers, self.dropout = nn.ModuleList(layers), dropout

    def forward(self, x: Any, *graph: Any) -> Any:
        for i, layer in enumerate(self.layers):
            x = layer(x, *graph)
            if i < len(self.layers) - 1:
                x = _activate(x, self.dropout, self.training)
        return x


class Linear(nn.Linear):
    """``nn.Linear`` that ignores the graph (an MLP's layer in a :class:`Stack`)."""

    def forward(self, x: torch.Tensor, *graph: Any) -> torch.Tensor:
        return super().forward(x)


class Rooted(nn.Module):
    """A ``HeteroConv`` (relations summed) plus a linear map of each node type's own row."""

    def __init__(self, conv: HeteroConv, types: list[str], a: int, b: int):
        super().__init__()
        self.conv, self.roots = conv, nn.ModuleDict({t: nn.Linear(a, b) for t in types})

    def forward(self, x: dict[str, torch.Tensor], edges: dict[ETYPE, torch.Tensor]) -> dict[str, torch.Tensor]:
        out = self.conv(x, edges)
        return {t: out[t] + root(x[t]) if t in out else root(x[t]) for t, root in self.roots.items()}


class Homogenised(nn.Module):
    """PyG's ``RGCNConv`` on the graph with its node types stacked into one index space (one relation index
    per edge type), back into a dictionary by type."""

    def __init__(self, conv: RGCNConv):
        super().__init__()
        self.conv = conv

    def forward(self, x: dict[str, torch.Tensor], edges: dict[ETYPE, torch.Tensor]) -> dict[str, torch.Tensor]:
        offsets = dict(zip(x, np.cumsum([0] + [v.shape[0] for v in x.values()]).tolist()))
        ei = torch.cat([e + torch.tensor([[offsets[et[0]]], [offsets[et[2]]]]) for et, e in edges.items()], 1)
        rel = torch.cat([torch.full((e.shape[1],), k) for k, e in enumerate(edges.values())])
        out = self.conv(torch.cat(list(x.values())), ei, rel)
        return dict(zip(x, out.split([v.shape[0] for v in x.values()])))


def _widths(s: Settings, a: int, out: int) -> list[tuple[int, int, bool]]:
    """(input width, output width, last) of every layer."""
    dims = [a] + [s.hidden] * (s.layers - 1) + [out]
    return [(i, o, k == s.layers - 1) for k, (i, o) in enumerate(zip(dims[:-1], dims[1:]))]


def _homo_layer(model: str, a: int, b: int, last: bool, s: Settings) -> nn.Module:
    """One layer of homogeneous ``model`` from ``a`` to ``b`` columns: GAT's hidden layers concatenate
    ``heads`` heads, its last is one head; GIN's MLP has two layers and a learnt epsilon."""
    if model == "sage":
        return SAGEConv(a, b)
    if model == "gcn":
        return GCNConv(a, b, cached=True)
    if model == "gat":
        return GATConv(a, b, heads=1) if last else GATConv(a, b // s.heads, heads=s.heads)
    if model == "gin":
        return GINConv(nn.Sequential(nn.Linear(a, b), nn.ReLU(), nn.Linear(b, b)), train_eps=True)
    if model == "mlp":
        return Linear(a, b)
    raise ValueError(f"no reference for homogeneous model {model!r}")


def _hetero_layer(model: str, data: Data, a: int, b: int, last: bool, s: Settings) -> nn.Module:
    """One relational layer of ``model`` from ``a`` to ``b`` columns on every node type: rsage averages the
    relations' SAGEConvs; rgat sums the relations' GATConvs (hidden: heads concatenated; last: averaged) plus
    a root per type; rgcn is PyG's RGCNConv (mean per relation, summed, one root); hgt is HGTConv."""
    etypes = list(data.edges)
    if model == "rsage":
        return HeteroConv({et: SAGEConv((a, a), b) for et in etypes}, aggr="mean")
    if model == "rgat":
        width = b if last else b // s.heads
        convs = {
            et: GATConv((a, a), width, heads=s.heads, concat=not last, add_self_loops=False, bias=False)
            for et in etypes
        }
        return Rooted(HeteroConv(convs, aggr="sum"), list(data.num_nodes), a, b)
    if model == "rgcn":
        return Homogenised(RGCNConv(a, b, len(etypes), aggr="mean"))
    if model == "hgt":
        return HGTConv(a, a, (list(data.num_nodes), etypes), heads=s.heads)
    raise ValueError(f"no reference for heterogeneous model {model!r}")


class Reference(nn.Module):
    """The reference network of ``model`` on ``data``: ``forward()`` gives the target type's class scores.
    Heterogeneous models first project each type's input to ``hidden``; HGT ends in a linear map to the
    classes (its layers stay ``hidden`` wide)."""

    def __init__(self, model: str, data: Data, s: Settings):
        super().__init__()
        self.model, self.target = model, data.target
        self.inputs = Inputs(data, s.hidden)
        dims = {t: v.shape[1] for t, v in self.inputs().items()}
        self.graph = {et: torch.from_numpy(e) for et, e in data.edges.items()}
        self.relational = data.hetero and model != "mlp"
        self.proj = nn.ModuleDict({t: nn.Linear(d, s.hidden) for t, d in dims.items()} if self.relational else {})
        self.head = nn.Linear(s.hidden, data.num_classes) if model == "hgt" else None
        out = s.hidden if self.head is not None else data.num_classes
        a = s.hidden if self.relational else dims[data.target]
        make = (
            (lambda *w: _hetero_layer(model, data, *w, s))
            if self.relational
            else (lambda *w: _homo_layer(model, *w, s))
        )
        self.body = Stack([make(i, o, last) for i, o, last in _widths(s, a, out)], s.dropout)

    def forward(self) -> torch.Tensor:
        x = self.inputs()
        if not self.relational:
            return self.body(x[self.target], *self.graph.values())
        x = {t: _project(self.proj[t], v) for t, v in x.items()}
        h = self.body(x, self.graph)[self.target]
        return self.head(h) if self.head is not None else h


def _project(lin: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``lin(x)``; for a sparse ``x`` only its non-zeros are multiplied."""
    return torch.sparse.mm(x, lin.weight.t()) + lin.bias if x.is_sparse else lin(x)


def train_reference(model: str, data: Data, s: Settings, seed: int) -> dict[str, float]:
    """Full-batch training: test accuracy at the best validation epoch and the median epoch time."""
    torch.manual_seed(seed)
    net = Reference(model, data, s)
    learnt = list(net.inputs.embeddings.values())
    dense = [p for name, p in net.named_parameters() if not name.startswith("inputs.embeddings")]
    opt = torch.optim.Adam(dense, lr=s.lr, weight_decay=s.weight_decay)
    sparse_opt = torch.optim.Adagrad(learnt, lr=s.sparse_lr) if learnt else None
    y, idx = torch.from_numpy(data.y), {k: torch.from_numpy(v) for k, v in data.split.items()}
    best, times = (-1.0, 0.0, -1), []
    for epoch in range(s.epochs):
        start = time.perf_counter()
        net.train()
        opt.zero_grad()
        if sparse_opt:
            sparse_opt.zero_grad()
        F.cross_entropy(net()[idx["train"]], y[idx["train"]]).backward()
        opt.step()
        if sparse_opt:
            sparse_opt.step()
        times.append(time.perf_counter() - start)
        val, test = _evaluate(net, y, idx)
        if val > best[0]:
            best = (val, test, epoch)
    return {"test_acc": best[1], "val_acc": best[0], "best_epoch": best[2], "epoch_s": _median_after_first(times)}


def _evaluate(net: nn.Module, y: torch.Tensor, idx: dict[str, torch.Tensor]) -> tuple[float, float]:
    net.eval()
    with torch.no_grad():
        pred = net().argmax(1)
    return tuple(float((pred[idx[k]] == y[idx[k]]).float().mean()) for k in ("val", "test"))


def _median_after_first(times: list[float]) -> float:
    return statistics.median(times[1:] if len(times) > 1 else times)


# -- graphshard through its command line ----------------------------------------------------------------------
def graphshard_cli() -> list[str]:
    """The ``graphshard`` command of this interpreter's environment (else the repository's .venv)."""
    for script in (Path(sys.executable).parent / "graphshard", ROOT / ".venv" / "bin" / "graphshard"):
        if script.is_file():
            return [str(script)]
    return ["graphshard"]


def offered() -> tuple[set[str], set[str]]:
    """The built-in models ``graphshard train --model`` offers and the flags ``graphshard train`` has, from its
    help: ``--model {a,b}``, or ``--model NAME`` followed by ``a: what it is; b: ...``."""
    text = subprocess.run([*graphshard_cli(), "train", "--help"], capture_output=True, text=True, check=True).stdout
    flags = set(re.findall(r"--[a-z][a-z-]*", text))
    choices = re.search(r"--model \{([^}]*)\}", text)
    if choices:
        return set(choices.group(1).split(",")), flags
    block = re.search(r"\n  --model NAME(.*?)\n  -", text, re.DOTALL)  # to the next option's line
    return set(re.findall(r"(?:^|; )(\w+): ", " ".join(block.group(1).split()))) if block else set(), flags


def train_graphshard(model: str, data_dir: Path, work: Path, s: Settings, seed: int, flags: set[str]) -> dict[str, Any]:
    """One ``graphshard train`` run on 2 processes: test accuracy at the best validation epoch (from the
    metrics file), the median epoch time, or the error it ended with."""
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp) / "metrics.json"
        cmd = [
            *graphshard_cli(),
            "train",
            "--dataset",
            str(data_dir),
            "--work-dir",
            str(work),
            "--num-procs",
            "2",
            "--model",
            model,
            "--epochs",
            str(s.epochs),
            "--hidden",
            str(s.hidden),
            "--dropout",
            str(s.dropout),
            "--lr",
            str(s.lr),
            "--weight-decay",
            str(s.weight_decay),
            "--sparse-lr",
            str(s.sparse_lr),
            "--fanouts",
            ",".join(map(str, s.fanouts)),
            "--batch-size",
            str(s.batch_size),
            "--seed",
            str(seed),
            "--metrics-out",
            str(metrics),
        ]
        if "--heads" in flags:
            cmd += ["--heads", str(s.heads)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not metrics.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return {"error": f"exit {done.returncode}: " + " | ".join(tail)}
        m = json.loads(metrics.read_text())
    times = [e["wall_s"] for e in m["epochs"]]
    return {
        "test_acc": m["test_acc"],
        "val_acc": m["val_acc"],
        "best_epoch": m["best_epoch"],
        "epoch_s": _median_after_first(times),
        "command": " ".join(cmd[1:-2]),
    }


# -- the table -----------------------------------------------------------------------------------------------
def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and spread of the seeds' test accuracy and epoch time (None where every run failed)."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"test_acc": None, "error": runs[0]["error"] if runs else "not run"}
    acc = [r["test_acc"] for r in ok]
    return {
        "test_acc": statistics.mean(acc),
        "test_acc_std": statistics.pstdev(acc),
        "epoch_s": statistics.median(r["epoch_s"] for r in ok),
        "failed_seeds": len(runs) - len(ok),
    }


def run_cell(
    model: str, name: str, data: Data, data_dir: Path, work: Path, s: Settings, available: tuple[set[str], set[str]]
) -> dict[str, Any]:
    """Both sides of one model x dataset, over the seeds."""
    models, flags = available
    ours_name = model if model in models else FALLBACK.get(model) if data.hetero else None
    row: dict[str, Any] = {"model": model, "dataset": name, "graphshard_model": ours_name}
    ref_runs = [train_reference(model, data, s, seed) for seed in range(s.seeds)]
    row["reference"] = {**_summary(ref_runs), "runs": ref_runs}
    if ours_name is None or ours_name not in models:
        row["ours"] = {"test_acc": None, "error": "not available"}
    else:
        runs = [train_graphshard(ours_name, data_dir, work / name, s, seed, flags) for seed in range(s.seeds)]
        row["ours"] = {**_summary(runs), "runs": runs}
    ours, ref = row["ours"]["test_acc"], row["reference"]["test_acc"]
    row["difference_points"] = None if ours is None or ref is None else 100 * (ours - ref)
    return row


def _acc(side: dict[str, Any], seeds: int) -> str:
    if side["test_acc"] is None:
        return "not available" if side.get("error") == "not available" else "failed"
    spread = f"±{100 * side['test_acc_std']:.1f}" if seeds > 1 else ""
    return f"{100 * side['test_acc']:.1f}{spread}"


def _ms(side: dict[str, Any]) -> str:
    return f"{1000 * side['epoch_s']:.1f}" if side.get("epoch_s") is not None else "-"


def print_table(result: dict[str, Any]) -> None:
    s, mc = result["settings"], result["machine"]
    print(
        f"machine: {mc['cpu']}, {mc['cores']} cores; hidden {s['hidden']}, {s['layers']} layers, dropout "
        f"{s['dropout']}, heads {s['heads']}, lr {s['lr']}, weight decay {s['weight_decay']}, {s['epochs']} epochs, "
        f"{s['seeds']} seed(s); graphshard: 2 procs x 2 parts, batch {s['batch_size']}, fanouts "
        f"{','.join(map(str, s['fanouts']))}"
    )
    print(
        f"{'model':<7}{'dataset':<13}{'ours %':>15}{'reference %':>15}{'diff pts':>10}{'ours ms/ep':>12}"
        f"{'ref ms/ep':>11}  note"
    )
    for r in result["rows"]:
        ours, ref, diff = r["ours"], r["reference"], r["difference_points"]
        note = "" if r["graphshard_model"] in (None, r["model"]) else f"graphshard --model {r['graphshard_model']}"
        if ours.get("error") not in (None, "not available"):
            note = ours["error"][:100]
        miss = "  <- misses 2 pts" if diff is not None and diff < -2 else ""
        print(
            f"{r['model']:<7}{r['dataset']:<13}{_acc(ours, s['seeds']):>15}{_acc(ref, s['seeds']):>15}"
            f"{'-' if diff is None else f'{diff:+.1f}':>10}{_ms(ours):>12}{_ms(ref):>11}  {note}{miss}"
        )
    print(f"notes: {result['notes']}")


def _merged(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``old`` rows with those of the same model and dataset in ``new`` put in their place (others appended)."""
    fresh = {(r["model"], r["dataset"]): r for r in new}
    kept = [fresh.pop((r["model"], r["dataset"]), r) for r in old]
    return kept + list(fresh.values())


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = Settings()
    p.add_argument("--models", help="comma-separated (default: every model of each dataset's kind)")
    p.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated (default: %(default)s)")
    p.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--hidden", type=int, default=d.hidden)
    p.add_argument("--heads", type=int, default=d.heads)
    p.add_argument("--seeds", type=int, default=d.seeds, help="runs per side, seeds 0..N-1 (figures: their mean)")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="graphshard's global mini-batch")
    p.add_argument("--fanouts", default=",".join(map(str, d.fanouts)), help="graphshard's sampling")
    p.add_argument("--threads", type=int, default=1, help="torch threads of the reference (a graphshard rank: 1)")
    p.add_argument("--quick", action="store_true", help="Cora only, 30 epochs, one seed")
    p.add_argument("--work", type=Path, default=ROOT / "bench-out" / "models", help="graphshard's partitions")
    p.add_argument("--out", type=Path, default=ROOT / "bench-out" / "models.json")
    p.add_argument(
        "--update",
        action="store_true",
        help="keep the rows of an existing --out that this run does not measure (e.g. to redo a few cells)",
    )
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    s = Settings(
        hidden=args.hidden,
        heads=args.heads,
        epochs=args.epochs,
        seeds=args.seeds,
        batch_size=args.batch_size,
        fanouts=tuple(int(f) for f in args.fanouts.split(",")),
    )
    s = replace(s, layers=len(s.fanouts))
    names = args.datasets.split(",")
    if args.quick:
        names, s = ["cora"], replace(s, epochs=30, seeds=1)
    wanted = set(args.models.split(",")) if args.models else None
    available = offered()
    rows: list[dict[str, Any]] = []
    result = {
        "machine": machine(),
        "settings": asdict(s),
        "graphshard_models": sorted(available[0]),
        "notes": NOTES,
        "rows": rows,
    }
    for name in names:
        if name not in DATASETS:
            p.error(f"unknown dataset {name!r} (known: {', '.join(DATASETS)})")
        data_dir = args.data_dir / name
        if not (data_dir / "meta.json").is_file():
            print(f"skipping {name}: {data_dir} is absent")
            continue
        data = read_data(data_dir)
        for model in DATASETS[name]:
            if wanted is None or model in wanted:
                rows.append(run_cell(model, name, data, data_dir, args.work, s, available))
                if not args.update:  # after every cell: an interrupted run keeps what it measured
                    write_result(args.out, result)
                print(
                    f"  {model} on {name}: ours {_acc(rows[-1]['ours'], s.seeds)}, "
                    f"reference {_acc(rows[-1]['reference'], s.seeds)}",
                    flush=True,
                )
    if args.update and args.out.is_file():
        result["rows"] = _merged(json.loads(args.out.read_text())["rows"], rows)
    write_result(args.out, result)
    print_table(result)
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()

"""The cost model of training: each process's predicted peak of private memory, from the partition config (node counts,
the partitions each process serves, their local node counts read from the file headers) and the model's
widths, plus the partition files it memory-maps (counted apart: page cache the kernel can drop).

A process holds what grows with the partitions it serves (degree tables, its split nodes' labels and masks;
``indptr`` and node IDs widened to int64 when the files store them narrower, as partitions written before
2026-11-29 do: per local node), the sampler's slot table (one per node of the
graph up to ``DENSE_SLOT_NODES``, then a hash of the batch), mini-batches, and at evaluation either sampled
batches (``--eval-fanouts``) or the layer-wise inference's rows: the plan and inputs of every local node of
one stored partition at a time and the outputs of the nodes it serves (with one partition per process the
outputs are the first rows of the next layer's inputs: one row per needed node). Nothing grows with the
other partitions, except where ranks of one host read each other's partitions in-process (co-located) from
such older files: then a rank also holds its own widened copy of their ``indptr`` and node IDs (int64 files are
mapped: shared page cache).
Coefficients from R-MAT scale 16-21 (64-d features, hidden 64, 2 and 4 partitions on 2 processes,
``benchmarks/plan_calibration.py``) and R-MAT 25 (4 partitions of 4.7-938 M edges, 9.6-16.5 M local nodes,
``benchmarks/scale.py --big --scale 25``; its skewed partition set the per-edge and per-local-node start-up
terms), fitted as an upper bound. Parts that stop growing with the graph
(mini-batches, start-up work in bounded blocks, a chunk of a layer's edges) are capped terms. Training also
holds its evaluated nodes' outputs and metric rows (rank 0 every rank's rows: the metrics are exact); ``embed``
(layer-wise inference alone) holds none of the training terms. Recalibrated on 2026-11-29 against the R-MAT 25
run's measured peaks (``benchmarks/rank_memory.py``): embed 4.59 / 5.96 / 4.66 / 6.76 GiB per rank, 21.97
together, predicted 22.8 (within 1-4 % per rank, each above); training 2.09-2.74 GiB. On R-MAT 23 (four
stream partitions, 2.5-4.4 M local nodes) the same figures were 2-3 % under ``embed``'s light ranks: the
start-up cap rose by 80 MiB (the gap did not grow with the graph: R-MAT 25's light ranks were over).
"""

from __future__ import annotations

import math

from ..distributed.remote.sampler import DENSE_SLOT_NODES
from ..distributed.stores.partitions import served_range, stored_per_process
from ..errors import InputError
from ..format.config import PartitionConfig
from ..format.dtypes import WIDE_KEYS
from ..format.tensorfile import read_header
from ..memory import Estimate, gib
from ..tasks.options import TrainOptions

TRAIN_BASE = 350 << 20  # a process: torch, PyG, torchmetrics, model (348 MiB training, 280 embed, on 2,000 nodes)
BATCHES = 600  # per node of the graph, up to BATCHES_CAP: mini-batches in flight (they stop growing with the graph)
BATCHES_CAP = 40 << 20
SETUP = 160  # per node of the graph, up to SETUP_CAP: start-up work in bounded blocks (validation, degrees)
SETUP_CAP = 280 << 20  # 200 until R-MAT 23's embed measured 1.51 / 1.43 GiB on its light ranks against 1.47 / 1.47
SLOT = 8  # per node of the graph up to DENSE_SLOT_NODES: the sampler's slot table (int64)
PER_LOCAL = 44  # per local node of every stored partition served: degrees, labels, masks
WIDENED = 8  # per local node, for each of indptr and node/_ID a partition file stores narrower than int64
PER_EDGE = 1  # per stored edge of every partition served (measured at R-MAT 25: 938 M edges added ~0.9 GiB)
LAYERWISE_CHUNK = 60  # per edge of a partition, up to LAYERWISE_CHUNK_CAP: one chunk of a layer's edges
LAYERWISE_CHUNK_CAP = 120 << 20  # (graphshard.infer.plan.EDGES_PER_CHUNK)
LAYERWISE_PLAN = 48  # per local node of the partition being computed: its plan (needed rows, types, positions)
LAYERWISE_ROWS = 1.0  # x the float32 rows a layer holds at its peak (inputs and outputs: see _layer_rows)
EVAL_PER_INNER = 64  # per inner node served, training: the evaluated nodes' outputs and metric rows (R-MAT 25)
GATHER_PER_NODE = 24  # per node of the graph, rank 0 of a training run: every rank's metric rows and their metrics
LAYERWISE_SEGMENT = 64 << 20  # serving several partitions: their plans and rows held together (measured 3-110 MiB)


def train_estimates(
    cfg: PartitionConfig,
    world: int,
    feat_width: int,
    hidden: int,
    *,
    layerwise: bool,
    layers: int = 2,
    outputs: int | None = None,
    host_ranks: int = 1,
    training: bool = True,
) -> list[Estimate]:
    """One estimate per process (``method`` = ``"rank r"``) of training on ``cfg``'s partitions with
    ``world`` processes; ``feat_width``: input columns; ``layerwise``: evaluation by layer-wise inference
    (the default) rather than sampled batches; ``layers``: the layers evaluated, ``outputs``: the last one's
    width (default ``hidden``); ``host_ranks``: consecutive ranks per host that read each other's partitions
    in-process (co-located; 1: none); ``training``: False for ``embed`` (layer-wise inference alone: no
    mini-batches, no sampler, no per-edge start-up work of training, no evaluation metrics)."""
    group = stored_per_process(cfg.num_parts, world)
    sharing = max(1, world // cfg.num_parts)
    inner = [sum(int(r[p, 1] - r[p, 0]) for r in cfg.node_map.values()) for p in range(cfg.num_parts)]
    headers = [read_header(cfg.part_path(p, "part_graph")) for p in range(cfg.num_parts)]  # no data read
    local = [_local_nodes(h) for h in headers]
    widened = [_widened_per_node(h) * n_local for h, n_local in zip(headers, local)]  # bytes of int64 copies
    stored = [sum(int(r[p, 1] - r[p, 0]) for r in cfg.edge_map.values()) for p in range(cfg.num_parts)]
    n = cfg.num_nodes
    out = []
    for rank in range(world):
        served = served_range(cfg.num_parts, world, 1, rank)[1]
        host = range(rank - rank % host_ranks, min(world, rank - rank % host_ranks + host_ranks))
        near = {p for r in host for p in served_range(cfg.num_parts, world, 1, r)[1]} - set(served)
        peak = TRAIN_BASE + min(SETUP_CAP, SETUP * n) + sum(PER_LOCAL * local[p] + widened[p] for p in served)
        peak += sum(widened[p] for p in near)
        if training:
            peak += (
                min(BATCHES_CAP, BATCHES * n)
                + SLOT * min(n, DENSE_SLOT_NODES)
                + PER_EDGE * sum(stored[p] for p in served)
                + EVAL_PER_INNER * sum(inner[p] for p in served)
                + GATHER_PER_NODE * n * (rank == 0)
            )
        phase = "training"
        if layerwise:
            edges = max(stored[p] for p in served) // sharing
            others = sum(inner[p] for p in served) - min(inner[p] for p in served)
            need = max(local[p] for p in served) // sharing
            dst = max(inner[p] for p in served) // sharing
            aliased = group == 1 and sharing == 1
            peak += (
                min(LAYERWISE_CHUNK_CAP, LAYERWISE_CHUNK * edges)
                + LAYERWISE_PLAN * need
                + int(
                    LAYERWISE_ROWS
                    * _layer_rows(need, dst, feat_width, hidden, last=outputs or hidden, layers=layers, aliased=aliased)
                )
                + 4 * hidden * others
                + LAYERWISE_SEGMENT * (group > 1)
            )
            phase = "layer-wise evaluation"
        mapped = sum(
            cfg.part_path(p, k).stat().st_size for p in served for k in cfg.parts[p] if cfg.part_path(p, k).is_file()
        )
        out.append(Estimate(f"rank {rank}", peak, 0, phase, mapped_bytes=mapped))
    return out


def _layer_rows(need: int, dst: int, feat: int, hidden: int, *, last: int, layers: int, aliased: bool) -> int:
    """Bytes of float32 rows at the peak of a layer (graphshard.infer.layerwise): its inputs (one row per needed
    node), its outputs (one per destination) and, unless ``aliased`` (the previous outputs are the first rows of
    the inputs), the previous layer's shard while the inputs are read; ``last``: the last layer's output
    width. With ``aliased`` the outputs are the first rows of a tensor of every needed node's row, whose other
    rows are not touched (not resident) before the next layer reads them."""
    peak = 0
    for i in range(layers):
        width_in = feat if i == 0 else hidden
        width_out = hidden if i + 1 < layers else last
        if aliased:  # the outputs' storage has a row per needed node, but only the own rows are written yet
            held = need * width_in + dst * width_out
        else:
            held = need * width_in + dst * width_out + (dst * width_in if i else 0)
        peak = max(peak, 4 * held)
    return peak


def evaluated(cfg: PartitionConfig, opts: TrainOptions, embedding_layer: str = "output") -> tuple[int, int]:
    """The layers layer-wise inference computes for ``opts`` and the last one's width: the classes of node
    classification, the hidden width for link prediction or the hidden embedding layer."""
    if embedding_layer == "hidden":
        return opts.num_layers - 1, opts.hidden
    classes = opts.num_classes or cfg.num_classes
    return opts.num_layers, (classes or opts.hidden) if opts.task == "node" else opts.hidden


def _local_nodes(header: dict) -> int:
    """Inner and HALO nodes of a stored partition, from the header of its structure file."""
    return int(header.get("node/_ID", {}).get("shape", [0])[0])


def _widened_per_node(header: dict) -> int:
    """Bytes per local node a reader allocates to widen a stored partition's per-node tensors to int64
    (:func:`graphshard.format.load.widen_nodes`), from the header of its structure file: 0 when stored int64."""
    return sum(WIDENED for key in WIDE_KEYS if header.get(key, {}).get("dtype", "I64") != "I64")


def feature_width(cfg: PartitionConfig, names: tuple[str, ...] = ("feat", "x")) -> int:
    """Input columns of the widest node type's features (0 when no type has any)."""
    widths = [
        math.prod(shape)
        for key, (_, shape) in cfg.feature_schema.get("node_feats", {}).items()
        if key.rsplit("/", 1)[1] in names
    ]
    return max(widths, default=0)


def check_train_fits(
    cfg: PartitionConfig,
    world: int,
    local: int,
    hidden: int,
    *,
    layerwise: bool,
    budget: int,
    step: str = "training",
    layers: int = 2,
    outputs: int | None = None,
    colocated: bool = True,
) -> None:
    """Raise :class:`InputError` when the ``local`` processes started on this machine (of ``world``) are
    predicted to need more than ``budget`` bytes together (``step``: ``training``, or ``embed``, whose rank
    count is the checkpoint's; ``layers`` evaluated and the last one's ``outputs``: see :func:`train_estimates`;
    ``colocated``: they read each other's partitions in-process)."""
    width = feature_width(cfg) or hidden
    host_ranks = local if colocated else 1
    per = train_estimates(
        cfg,
        world,
        width,
        hidden,
        layerwise=layerwise,
        layers=layers,
        outputs=outputs,
        host_ranks=host_ranks,
        training=step == "training",
    )[:local]
    need = sum(e.peak_bytes for e in per)
    if budget and need > budget:
        worst = max(per, key=lambda e: e.peak_bytes)
        hint = " or --eval-fanouts (sampled evaluation)" if layerwise else ""
        fix = f"start fewer processes{hint}, or spread them" if step == "training" else "spread the ranks"
        raise InputError(
            f"{step} is predicted to need {gib(need)} on this machine ({local} processes; "
            f"{worst.method} {gib(worst.peak_bytes)} at its {worst.phase}), more than the "
            f"{gib(budget)} allowed (--memory); {fix} over machines (graphshard plan --part-config "
            f"{cfg.path} for the table)"
        )

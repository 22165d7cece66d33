"""The cost model of training: each process's predicted peak of private memory, from the partition config (node counts,
the partitions each process serves, their local node counts read from the file headers) and the model's
widths, plus the partition files it memory-maps (counted apart: page cache the kernel can drop).

A process holds tables over every node of the graph (labels, split masks, the sampler's slot table),
degree tables of the nodes it serves, mini-batches, and at evaluation either sampled batches
(``--eval-fanouts``) or the layer-wise inference's rows: the inputs of every local node of one stored
partition at a time, and the layer outputs of the nodes it serves. Coefficients measured on R-MAT scale
10-21 (64-d features, hidden 64, 2 and 4 partitions on 2 processes, ``benchmarks/plan_calibration.py``)
and 24 (16.8 M nodes, 4 partitions on 2 processes, ``benchmarks/scale.py --big``), fitted as an upper
bound: with sampled evaluation every run within +0-10 %. Parts that stop growing with the graph
(mini-batches, start-up work in bounded blocks, a chunk of a layer's edges) are capped terms.
"""

from __future__ import annotations

import math

from ..distributed.served import stored_per_process
from ..errors import InputError
from ..format.config import PartitionConfig
from ..format.tensorfile import read_header
from ..memory import Estimate, gib

TRAIN_BASE = 275 << 20  # a training process: torch, PyG, RPC agent, model (measured 273 MiB on a tiny graph)
BATCHES = 600  # per node of the graph, up to BATCHES_CAP: mini-batches in flight (they stop growing with the graph)
BATCHES_CAP = 40 << 20
SETUP = 160  # per node of the graph, up to SETUP_CAP: start-up work in bounded blocks (validation, degrees)
SETUP_CAP = 300 << 20
PER_NODE = 60  # per node of the graph, on every process (labels, masks, the sampler's slot table)
PER_NODE_SEGMENT = 20  # and per node of the graph for every stored partition served beyond the first
LAYERWISE_CHUNK = 60  # per edge of a partition, up to LAYERWISE_CHUNK_CAP: one chunk of a layer's edges
LAYERWISE_CHUNK_CAP = 120 << 20  # (graphshard.infer.layerwise.EDGES_PER_CHUNK)
LAYERWISE_PER_LOCAL = 5.0  # per local node of a partition and per input+hidden column (float32 plus plan)
LAYERWISE_SEGMENT = 64 << 20  # serving several partitions: their plans and rows held together (measured 3-110 MiB)


def train_estimates(cfg: PartitionConfig, world: int, feat_width: int, hidden: int, layerwise: bool) -> list[Estimate]:
    """One estimate per process (``method`` = ``"rank r"``) of training on ``cfg``'s partitions with
    ``world`` processes; ``feat_width``: input columns; ``layerwise``: evaluation by layer-wise inference
    (the default) rather than sampled batches."""
    group = stored_per_process(cfg.num_parts, world)
    sharing = max(1, world // cfg.num_parts)
    inner = [sum(int(r[p, 1] - r[p, 0]) for r in cfg.node_map.values()) for p in range(cfg.num_parts)]
    out = []
    for rank in range(world):
        first = (rank // sharing) * group
        served = range(first, first + group)
        n = cfg.num_nodes
        peak = (
            TRAIN_BASE
            + min(BATCHES_CAP, BATCHES * n)
            + min(SETUP_CAP, SETUP * n)
            + PER_NODE * n
            + PER_NODE_SEGMENT * n * (group - 1)
        )
        phase = "training"
        if layerwise:
            local = max(_local_nodes(cfg, p) for p in served) // sharing
            edges = max(sum(int(r[p, 1] - r[p, 0]) for r in cfg.edge_map.values()) for p in served) // sharing
            others = sum(inner[p] for p in served) - min(inner[p] for p in served)
            peak += (
                min(LAYERWISE_CHUNK_CAP, LAYERWISE_CHUNK * edges)
                + 8 * hidden * others
                + int(LAYERWISE_PER_LOCAL * (feat_width + hidden) * local)
                + LAYERWISE_SEGMENT * (group > 1)
            )
            phase = "layer-wise evaluation"
        mapped = sum(
            cfg.part_path(p, k).stat().st_size for p in served for k in cfg.parts[p] if cfg.part_path(p, k).is_file()
        )
        out.append(Estimate(f"rank {rank}", peak, 0, phase, mapped))
    return out


def _local_nodes(cfg: PartitionConfig, part: int) -> int:
    """Inner and HALO nodes of a stored partition, from its file header (no data read)."""
    spec = read_header(cfg.part_path(part, "part_graph")).get("node/_ID", {})
    return int(spec.get("shape", [0])[0])


def feature_width(cfg: PartitionConfig, names: tuple[str, ...] = ("feat", "x")) -> int:
    """Input columns of the widest node type's features (0 when no type has any)."""
    widths = [
        math.prod(shape)
        for key, (_, shape) in cfg.feature_schema.get("node_feats", {}).items()
        if key.rsplit("/", 1)[1] in names
    ]
    return max(widths, default=0)


def check_train_fits(
    cfg: PartitionConfig, world: int, local: int, hidden: int, layerwise: bool, budget: int, step: str = "training"
) -> None:
    """Raise :class:`InputError` when the ``local`` processes started on this machine (of ``world``) are
    predicted to need more than ``budget`` bytes together (``step``: ``training``, or ``embed``, whose rank
    count is the checkpoint's)."""
    per = train_estimates(cfg, world, feature_width(cfg) or hidden, hidden, layerwise)[:local]
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

"""What a rank holds on its device (``--device cuda``), predicted before any process starts: the model and its
optimiser's state, the batches in flight and their activations, the device feature cache, and one chunk of
layer-wise inference; a run whose ranks do not fit their devices is refused with the numbers.

The terms are upper bounds from the shapes: a batch's sampled nodes are the seeds times the product of
``1 + fanout`` (every in-edge counted at the graph's mean in-degree), capped by the graph's node count; each
sampled node keeps its input row and, per layer, a few rows of the hidden width through the forward and
backward passes; each sampled edge its index pair and, per layer, a message of the hidden width. The CUDA
context and torch's kernels take a fixed amount per process."""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass

from ..device.choice import cuda_devices, resolve
from ..device.memory import capacity as device_capacity
from ..distributed.remote.cache import cache_budget
from ..errors import InputError
from ..format.config import PartitionConfig
from ..infer.plan import EDGES_PER_CHUNK
from ..memory import gib
from ..tasks.options import TrainOptions
from .cost import feature_width

CONTEXT = 600 << 20  # the CUDA context, torch's kernels and the caching allocator's slack, per process
IN_FLIGHT = 3  # batches on the device at once: one computed, one copied ahead, one the allocator keeps
NODE_ACTIVATIONS = 6  # values of the hidden width per sampled node and layer, forward and backward
EDGE_MESSAGES = 2  # values of the hidden width per sampled edge and layer (PyG's messages and their gradients)
OPTIMISER = 4  # float32 copies of each parameter: itself, its gradient, Adam's two moments
FIT = 0.95  # of a device's memory a run may plan to use


@dataclass(frozen=True)
class DeviceNeed:
    """One rank's predicted peak on its device, by part (bytes)."""

    context: int
    model: int
    batches: int
    cache: int
    _: KW_ONLY
    layerwise: int

    @property
    def peak(self) -> int:
        """Training and layer-wise inference do not overlap: the larger of the two on top of the rest."""
        return self.context + self.model + self.cache + max(self.batches, self.layerwise)

    def parts(self) -> str:
        return (
            f"context {gib(self.context)} + model and optimiser {gib(self.model)} + cache {gib(self.cache)} + "
            f"max(batches {gib(self.batches)}, layer-wise chunk {gib(self.layerwise)})"
        )


def sampled(seeds: int, fanouts: list[int], mean_degree: float, nodes: int) -> tuple[int, int]:
    """Nodes and edges of a batch of ``seeds`` sampled with ``fanouts`` (at most ``nodes`` nodes)."""
    frontier, total, edges = float(seeds), float(seeds), 0.0
    for f in fanouts:
        step = frontier * (mean_degree if f < 0 else min(f, max(1.0, mean_degree)))
        edges += step
        frontier = step
        total += step
    return int(min(total, nodes)), int(edges)


def parameters(width: int, hidden: int, out: int, layers: int, *, relations: int) -> int:
    """An upper bound on the parameters of a GNN of ``layers`` layers, two weight matrices a layer per relation."""
    dims = [width] + [hidden] * (layers - 1) + [out]
    per_relation = sum(2 * a * b + b for a, b in zip(dims, dims[1:]))
    return per_relation * max(1, relations) + width * hidden  # and an input projection


def device_need(cfg: PartitionConfig, opts: TrainOptions, world: int, width: int) -> DeviceNeed:
    """The device memory of one of ``world`` ranks training on ``cfg`` as ``opts`` says (``width``: input columns)."""
    nodes = max(1, cfg.num_nodes)
    edges = max(1, cfg.num_edges)
    seeds = math.ceil(opts.batch_size / world)
    if opts.task == "link":
        seeds = int(seeds * (2 + 2 * opts.neg_ratio))  # both ends of the positives and of the negatives
    n, e = sampled(seeds, opts.fanouts, edges / nodes, nodes)
    hidden, layers, out = opts.hidden, opts.num_layers, cfg.num_classes or opts.hidden
    row = 2 if opts.precision == "bf16-mixed" else 4  # activations under autocast are half as wide
    batch = n * (4 * width + 16) + e * 16  # input rows, labels and IDs; edge index pairs
    work = layers * (n * hidden * NODE_ACTIVATIONS + e * hidden * EDGE_MESSAGES) * row
    params = parameters(width, hidden, out, layers, relations=len(cfg.etypes))
    chunk = min(EDGES_PER_CHUNK, edges)
    # edge pairs; the chunk's source rows (at most one per edge) and outputs; messages of the hidden width
    layerwise = chunk * 16 + min(chunk, nodes) * 4 * max(width, hidden) * 2 + chunk * 4 * hidden * EDGE_MESSAGES
    row_bytes = 4 * width
    cache = 0
    if opts.cache_device == "cuda":  # the rows the cache's budget holds, as the cache itself counts them
        cache = cache_budget(opts.cache_ratio, opts.cache_mb, nodes // max(1, cfg.num_parts), row_bytes) * row_bytes
    return DeviceNeed(CONTEXT, params * 4 * (OPTIMISER + 1), IN_FLIGHT * batch + work, cache, layerwise=layerwise)


def check_device_fits(need: DeviceNeed, ranks: list[int], capacity: list[int]) -> None:
    """Refuse, with the numbers, a run whose ranks do not fit their devices: ``ranks[d]`` ranks share device
    ``d`` of ``capacity[d]`` bytes, each needing ``need``."""
    for d, (count, total) in enumerate(zip(ranks, capacity)):
        if count and total and count * need.peak > FIT * total:
            raise InputError(
                f"training is predicted to need {gib(count * need.peak)} on cuda:{d} ({count} rank(s) x "
                f"{gib(need.peak)}: {need.parts()}), more than {FIT:.0%} of its {gib(total)}; lower --batch-size, "
                "--fanouts or --cache-mb, use --precision bf16-mixed, or start fewer ranks per device"
            )


def ranks_per_device(ranks: int, devices: int) -> list[int]:
    """How many of a host's ``ranks`` each of its ``devices`` takes (round robin: :mod:`graphshard.device.choice`)."""
    return [len(range(d, ranks, devices)) for d in range(devices)]


def check_devices_fit(cfg: PartitionConfig, opts: TrainOptions, world: int, local: int) -> DeviceNeed | None:
    """With ``opts.device`` resolving to CUDA: the need of each of the ``local`` ranks started here (of ``world``),
    refused when it does not fit this machine's devices (see :func:`check_device_fits`); None on CPUs."""
    if resolve(opts.device) != "cuda":
        return None
    need = device_need(cfg, opts, world, feature_width(cfg) or opts.hidden)
    count = cuda_devices()
    check_device_fits(need, ranks_per_device(local, count), [device_capacity(d) for d in range(count)])
    return need

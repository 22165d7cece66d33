"""The cost model of in-memory partitioning (``graphshard partition``): the predicted peak of private memory for
each method, from the dataset's node and edge counts and its size on disk.

``partition_graph`` holds the graph's structure (the dataset's arrays are memory-mapped; features stay
in the page cache), its homogeneous form, the assignment, the relabelled structure and one partition
being built, plus the method's own working set. Coefficients fitted as an upper bound to
``graphshard partition`` on R-MAT scale 12, 16, 18 and 20 with 64-d features into 4 parts, every method
(private memory sampled every 10 ms): all within +0-25 %.
"""

from __future__ import annotations

import json
import os

from ..chunked.counts import GraphCounts
from ..chunked.spec import read_metadata
from ..errors import InputError
from ..format.inputs import require_dir
from ..memory import Estimate, gib

PARTITION_BASE = 190 << 20  # interpreter, NumPy, numba, the partitioners' libraries (measured 186 MiB)
PER_EDGE = 17  # homogeneous form, relabelling and the partition being built, per stored edge
SMALL = 16  # per stored edge, up to SMALL_CAP: buffers that stop growing with the graph
SMALL_CAP = 30 << 20
STREAM = (32, 8)  # stream: bytes per node (parts, state) and per adjacency entry (its in-memory CSR)
KAMINPAR = (32 << 20, 24, 7)  # KaMinPar in memory: fixed, per node, per stored edge
METIS = (16, 125)  # METIS: per node, per stored edge (its CSR, graph copies and partition state)


def dataset_counts(path: str | os.PathLike) -> tuple[int, int, int]:
    """``(nodes, edges, bytes on disk)`` of a dataset directory (``meta.json``) or chunked graph."""
    d = require_dir(path)
    if (d / "metadata.json").is_file():
        c = GraphCounts.of(read_metadata(d))
        return c.nodes, c.edges, c.disk_bytes
    try:
        meta = json.loads((d / "meta.json").read_text())
        total = lambda v: sum(v.values()) if isinstance(v, dict) else int(v)  # noqa: E731
        nodes, edges = total(meta["num_nodes"]), total(meta["num_edges"])
    except (OSError, ValueError, KeyError, AttributeError, TypeError) as exc:
        raise InputError(f"{d}: no readable meta.json with num_nodes and num_edges ({exc})") from None
    return nodes, edges, sum(f.stat().st_size for f in d.rglob("*.npy"))


def partition_estimates(path: str | os.PathLike, num_parts: int) -> list[Estimate]:
    """Predicted peaks of ``graphshard partition`` with ``random``, ``stream``, ``kaminpar`` and ``metis``."""
    nodes, edges, _ = dataset_counts(path)
    return graph_estimates(nodes, edges)


def graph_estimates(nodes: int, edges: int) -> list[Estimate]:
    """Predicted peaks of :func:`~graphshard.partition.api.partition_graph` per method, for a graph of ``nodes``
    nodes and ``edges`` stored edges."""
    common = PARTITION_BASE + min(SMALL_CAP, SMALL * edges) + PER_EDGE * edges
    method = {
        "random": 8 * nodes,
        "stream": STREAM[0] * nodes + STREAM[1] * edges,
        "kaminpar": KAMINPAR[0] + KAMINPAR[1] * nodes + KAMINPAR[2] * edges,
        "metis": METIS[0] * nodes + METIS[1] * edges,
    }
    return [Estimate(m, common + extra, 0, "partition") for m, extra in method.items()]


def check_partition_fits(dataset: str, method: str, num_parts: int, budget: int) -> None:
    """Raise :class:`InputError` when ``graphshard partition --method`` is predicted to need more than ``budget``
    (checked from the dataset's counts, before it is read)."""
    try:
        options = {e.method: e for e in partition_estimates(dataset, num_parts)}
    except InputError:
        return  # no counts to plan with: reading the dataset reports what is wrong with it
    refuse_unfit(options, method, budget)


def refuse_unfit(options: dict[str, Estimate], method: str, budget: int) -> None:
    """Raise :class:`InputError` when ``method``'s estimate among ``options`` exceeds ``budget`` (0: no limit)."""
    mine = options.get(method)
    if mine is None or not budget or mine.peak_bytes <= budget:
        return
    fits = [f"{m} ({gib(e.peak_bytes)})" for m, e in options.items() if e.peak_bytes <= budget]
    raise InputError(
        f"partition --method {method} is predicted to need {gib(mine.peak_bytes)}, more than the "
        f"{gib(budget)} allowed (--memory); methods that fit: {', '.join(fits) or 'none'}; graphs that "
        "do not fit in memory take the chunked pipeline (graphshard chunk, assign, dispatch)"
    )

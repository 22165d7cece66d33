"""In-memory partitioning (``graphshard partition``): the predicted peak of private memory for each method,
from the dataset's node and edge counts and its size on disk.

``partition_graph`` holds the graph's structure (the dataset's arrays are memory-mapped; features stay
in the page cache), its homogeneous form, the assignment, the relabelled structure and one partition
being built, plus the method's own working set. Coefficients fitted as an upper bound to
``graphshard partition`` on R-MAT scale 12, 16, 18 and 20 with 64-d features into 4 parts, every method
(private memory sampled every 10 ms): all within +0-25 %.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import InputError
from .estimate import Estimate

PARTITION_BASE = 190 << 20  # interpreter, NumPy, numba, the partitioners' libraries (measured 186 MiB)
PER_EDGE = 17  # homogeneous form, relabelling and the partition being built, per stored edge
SMALL = 16  # per stored edge, up to SMALL_CAP: buffers that stop growing with the graph
SMALL_CAP = 30 << 20
STREAM = (32, 8)  # stream: bytes per node (parts, state) and per adjacency entry (its in-memory CSR)
KAMINPAR = (32 << 20, 24, 7)  # KaMinPar in memory: fixed, per node, per stored edge
METIS = (16, 125)  # METIS: per node, per stored edge (its CSR, graph copies and partition state)


def dataset_counts(path: str | os.PathLike) -> tuple[int, int, int]:
    """``(nodes, edges, bytes on disk)`` of a dataset directory (``meta.json``) or chunked graph."""
    from ..format.inputs import require_dir

    d = require_dir(path)
    if (d / "metadata.json").is_file():
        from ..chunked.spec import read_metadata
        from .counts import GraphCounts

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
    common = PARTITION_BASE + min(SMALL_CAP, SMALL * edges) + PER_EDGE * edges
    method = {"random": 8 * nodes, "stream": STREAM[0] * nodes + STREAM[1] * edges,
              "kaminpar": KAMINPAR[0] + KAMINPAR[1] * nodes + KAMINPAR[2] * edges,
              "metis": METIS[0] * nodes + METIS[1] * edges}
    return [Estimate(m, common + extra, 0, "partition") for m, extra in method.items()]

"""In-memory partitioning (``graphshard partition``): the predicted peak of private memory for each method,
from the dataset's node and edge counts and its size on disk.

``partition_graph`` holds the graph (arrays read from the dataset), its homogeneous form, the
assignment, the relabelled structure and one partition being built, plus the method's own working set
(METIS's and KaMinPar's as measured for ``assign``, stream's in-memory adjacency). Coefficients fitted
as an upper bound to ``graphshard partition`` on R-MAT scale 12-20 with 64-d features into 4 parts
(every method; see the README).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import InputError
from .assign import BASE, COMPILED, KAMINPAR_BYTES_PER_ENTRY, KAMINPAR_FIXED, METIS_BYTES_PER_EDGE
from .estimate import Estimate

PER_EDGE = 40  # homogeneous form, relabelling and the partition being built, per stored edge
DATA_COPIES = 1.0  # the dataset's arrays as read (features included)
STREAM_PER_ENTRY = 8  # stream's in-memory adjacency, per entry (plus 8 bytes per node)


def dataset_counts(path: str | os.PathLike) -> tuple[int, int, int]:
    """``(nodes, edges, bytes on disk)`` of a dataset directory (``meta.json``) or chunked graph."""
    d = Path(path)
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
    nodes, edges, data = dataset_counts(path)
    common = BASE + COMPILED + int(DATA_COPIES * data) + PER_EDGE * edges
    method = {"random": 8 * nodes, "stream": 32 * nodes + STREAM_PER_ENTRY * edges,
              "kaminpar": KAMINPAR_FIXED + 24 * nodes + int(KAMINPAR_BYTES_PER_ENTRY * edges),
              "metis": METIS_BYTES_PER_EDGE * edges + 16 * nodes}
    return [Estimate(m, common + extra, 0, "partition") for m, extra in method.items()]

"""Step 1 of the out-of-core pipeline: compute a partition assignment for a chunked graph."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from ..chunked.load import load_chunked_graph
from ..chunked.spec import read_metadata
from ..errors import InputError
from ..partition.assign import assign
from ..partition.assign.random import random_assignment
from ..partition.homogenize import homogenize
from ..format.outputs import check_output_dir
from .assignment_files import write_assignment

log = logging.getLogger(__name__)


def assign_chunked(in_dir: str | os.PathLike, out_dir: str | os.PathLike, num_parts: int, method: str = "random",
                   fmt: str = "txt", seed: int = 0, balance_ntypes: np.ndarray | None = None,
                   balance_edges: bool = False, objtype: str = "cut", overwrite: bool = False) -> Path:
    """Write one assignment file per node type and ``partition_meta.json`` for the chunked graph in ``in_dir``.

    ``random`` never reads the graph (only counts from the metadata) and is exactly balanced per node
    type (counts differ by at most one). ``metis`` reads the structure only — never the features — and
    runs the in-memory METIS path with the same balance options (``balance_ntypes`` in homogeneous order).
    ``out_dir`` must be new, empty or an earlier assignment output unless ``overwrite``.
    """
    meta = read_metadata(in_dir)
    check_output_dir(out_dir, "assignment", overwrite)  # refuse before any work
    total = sum(meta.num_nodes.values())
    if isinstance(num_parts, bool) or num_parts < 1 or num_parts > max(total, 1):
        raise InputError(f"num_parts must be between 1 and the number of nodes ({total}), got {num_parts}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    if method == "random":
        if balance_ntypes is not None or balance_edges:
            raise InputError("random assignment balances every node type exactly; balance options are for metis")
        per_type = {t: random_assignment(n, num_parts, seed + 7919 * i)
                    for i, (t, n) in enumerate(meta.num_nodes.items())}
    elif method == "metis":
        g = load_chunked_graph(meta, features=False)
        view = homogenize(g)
        parts = assign(view, "metis", num_parts, 1, balance_ntypes, balance_edges, objtype, seed).parts
        per_type = {t: parts[view.node_offsets[i]: view.node_offsets[i + 1]] for i, t in enumerate(g.ntypes)}
    else:
        raise InputError(f"unknown assignment method {method!r}; choose 'random' or 'metis'")
    path = write_assignment(out_dir, per_type, num_parts, method, fmt,
                            {"graph_name": meta.graph_name, "seed": seed}, overwrite=overwrite)
    log.info("wrote %s assignment of %d nodes into %d parts to %s", method, total, num_parts, path.parent)
    return path

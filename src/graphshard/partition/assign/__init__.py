"""Node-to-partition assignment: one module per algorithm, and :func:`assign` to choose among them.

Balance options by method:

=============  ==================================  =========================================
method         ``balance_ntypes``                  ``balance_edges``
=============  ==================================  =========================================
``random``     exact: every class dealt evenly      not supported (error)
``metis``      METIS multi-constraint weights       METIS constraint on in-degree (per class)
``kaminpar``   not supported (error)                single node weight ``1 + in-degree``
``stream``     hard cap per class and part          hard cap on in-degree per part
explicit       not applicable (error)               not applicable (error)
=============  ==================================  =========================================
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import InputError
from ...graph import to_numpy
from ..homogenize import HomoView
from ..methods import METHODS
from .adjacency import undirected_csr
from .kaminpar import kaminpar_partition
from .metis import metis_kway
from .random import random_assignment
from .stream import in_memory_blocks, stream_partition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Assignment:
    """``parts[v]``: partition (machine) of homogeneous node ``v``; ``trainer_ids[v]``: its global trainer
    ``machine * T + local trainer`` when ``T > 1`` trainers per machine, else None."""

    parts: np.ndarray
    trainer_ids: np.ndarray | None


def balance_classes(classes: np.ndarray | None, num_nodes: int) -> np.ndarray | None:
    """``balance_ntypes`` as dense class IDs ``0..C-1``: one integer per node, none negative. Any values
    are accepted (10**12 included) and renumbered in sorted order, so the per-class constraint count is
    the number of distinct classes, never the largest value."""
    if classes is None:
        return None
    arr = np.asarray(classes)
    if arr.shape != (num_nodes,):
        raise InputError(f"balance_ntypes must have one entry per node ({num_nodes}), got shape {arr.shape}")
    if arr.dtype == bool:
        arr = arr.astype(np.int64)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"balance_ntypes must hold integers, got dtype {arr.dtype}")
    bad = np.flatnonzero(arr < 0)
    if bad.size:
        raise InputError(
            f"balance_ntypes: node {int(bad[0])} has negative class {int(arr[bad[0]])}; classes are "
            "non-negative integers"
        )
    return np.unique(arr, return_inverse=True)[1].astype(np.int64).reshape(-1)


def assign(
    view: HomoView,
    method: str | Any,
    num_parts: int,
    trainers: int = 1,
    *,
    balance_ntypes: np.ndarray | None = None,
    balance_edges: bool = False,
    objtype: str = "cut",
    seed: int = 0,
) -> Assignment:
    """Compute the node assignment with ``method`` (a name in :data:`METHODS` or an explicit array)."""
    balance_ntypes = balance_classes(balance_ntypes, view.num_nodes)
    if not isinstance(method, str):
        return Assignment(
            _explicit(view, method, num_parts, trainers, classes=balance_ntypes, balance_edges=balance_edges), None
        )
    if method not in METHODS:
        raise InputError(f"unknown partition method {method!r}; choose one of {list(METHODS)} or pass an array")
    fine_parts = num_parts * trainers
    if method == "random":
        if balance_edges:
            raise InputError("balance_edges is not supported with part_method='random' (use 'metis')")
        fine = random_assignment(view.num_nodes, fine_parts, seed, balance_ntypes)
        parts = fine % num_parts
        return Assignment(parts, parts * trainers + fine // num_parts if trainers > 1 else None)
    if method == "kaminpar" and balance_ntypes is not None:
        raise InputError("balance_ntypes is not supported with part_method='kaminpar' (use 'metis' or 'random')")
    in_degree = np.bincount(view.dst, minlength=view.num_nodes) if balance_edges else None
    if method == "stream":
        csr = undirected_csr(view.src, view.dst, view.num_nodes)
        fine = stream_partition(
            in_memory_blocks(csr.xadj, csr.adjncy),
            view.num_nodes,
            int(csr.adjncy.shape[0]),
            fine_parts,
            classes=balance_ntypes,
            weights=in_degree,
        ).astype(np.int64)
        return Assignment(fine // trainers, fine if trainers > 1 else None)
    if method == "metis":
        csr = undirected_csr(view.src, view.dst, view.num_nodes)
        start = time.perf_counter()
        fine = metis_kway(csr, fine_parts, metis_weights(balance_ntypes, in_degree), objtype, seed=seed)
    else:
        start = time.perf_counter()
        fine = kaminpar_partition(
            lambda: undirected_csr(view.src, view.dst, view.num_nodes),
            fine_parts,
            None if in_degree is None else in_degree + 1,
            seed,
        )
    log.info("%s partitioner call: %.2f s", method, time.perf_counter() - start)
    return Assignment(fine // trainers, fine if trainers > 1 else None)


def metis_weights(classes: np.ndarray | None, in_degree: np.ndarray | None) -> np.ndarray | None:
    """METIS vertex weights (N, ncon): one indicator column per class, and in-degree (per class) columns."""
    if classes is None:
        return None if in_degree is None else in_degree.reshape(len(in_degree), 1).astype(np.int64)
    n = len(classes)
    _, inverse = np.unique(classes, return_inverse=True)
    num_classes = int(inverse.max(initial=-1)) + 1
    columns = 2 * num_classes if in_degree is not None else num_classes
    w = np.zeros((n, columns), dtype=np.int64)
    rows = np.arange(n)
    w[rows, inverse] = 1
    if in_degree is not None:
        w[rows, num_classes + inverse] = in_degree
    return np.ascontiguousarray(w[:, w.sum(axis=0) > 0])


def _explicit(
    view: HomoView, parts: Any, num_parts: int, trainers: int, *, classes: Any, balance_edges: bool
) -> np.ndarray:
    if trainers > 1 or classes is not None or balance_edges:
        raise InputError(
            "an explicit assignment cannot be combined with num_trainers_per_machine > 1, "
            "balance_ntypes or balance_edges"
        )
    arr = to_numpy(parts)
    if arr.ndim != 1 or arr.shape[0] != view.num_nodes:
        raise InputError(
            f"explicit assignment must be a 1-D array of {view.num_nodes} partition IDs, got shape {arr.shape}"
        )
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"explicit assignment must hold integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    bad = (arr < 0) | (arr >= num_parts)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"explicit assignment: node {i} has partition {int(arr[i])}, outside [0, {num_parts})")
    return arr

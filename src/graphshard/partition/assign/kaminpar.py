"""KaMinPar (shared-memory multilevel partitioner) through its Python binding.

The binding builds graphs only from files, so the CSR is written once as a ParHIP binary file
(64-bit IDs, optional 64-bit node weights) in a temporary directory and loaded from there.
KaMinPar takes one node weight per node: no multi-constraint balancing.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable

import numpy as np

from .adjacency import UndirectedCSR

_HEADER = 24


def write_parhip(path: str, csr: UndirectedCSR, node_weights: np.ndarray | None = None) -> None:
    """Write ``csr`` as a ParHIP binary graph (version bits: no edge weights; node weights if given)."""
    write_parhip_blocks(path, csr.num_nodes, [csr.xadj], [csr.adjncy], node_weights=node_weights)


def write_parhip_blocks(
    path: str, num_nodes: int, xadj_chunks, adjncy_chunks, *, node_weights: np.ndarray | None = None
) -> None:
    """Write a ParHIP binary graph from pieces (for adjacency held on disk): ``xadj_chunks`` yields
    consecutive pieces of ``xadj`` (n + 1 entries in all, int64), ``adjncy_chunks`` of ``adjncy``."""
    version = 3 if node_weights is None else 1  # bit 0: no edge weights, bit 1: no node weights
    with open(path, "wb") as f:
        f.write(np.array([version, num_nodes, 0], dtype=np.uint64).tobytes())  # m patched below
        m = 0
        for piece in xadj_chunks:
            f.write((np.asarray(piece, dtype=np.int64) * 8 + (_HEADER + (num_nodes + 1) * 8)).astype(np.uint64).data)
            m = int(piece[-1])
        for piece in adjncy_chunks:
            f.write(np.ascontiguousarray(piece, dtype=np.int64).data)
        if node_weights is not None:
            f.write(np.ascontiguousarray(node_weights, dtype=np.int64).data)
        f.seek(16)
        f.write(np.array([m], dtype=np.uint64).tobytes())


def kaminpar_from_file(
    path: str, num_nodes: int, num_parts: int, seed: int = 0, *, imbalance: float = 0.03, num_threads: int | None = None
) -> np.ndarray:
    """Partition the ParHIP graph file ``path`` (loaded compressed) into ``num_parts`` blocks."""
    import kaminpar

    if num_parts == 1 or num_nodes == 0:
        return np.zeros(num_nodes, dtype=np.int64)
    graph = kaminpar.load_graph(path, kaminpar.GraphFileFormat.PARHIP, compress=True)
    kaminpar.reseed(seed)
    solver = kaminpar.KaMinPar(num_threads or len(os.sched_getaffinity(0)), kaminpar.default_context())
    return np.asarray(solver.compute_partition(graph, num_parts, imbalance), dtype=np.int64)


def kaminpar_partition(
    make_csr: Callable[[], UndirectedCSR],
    num_parts: int,
    node_weights: np.ndarray | None = None,
    seed: int = 0,
    *,
    imbalance: float = 0.03,
    num_threads: int | None = None,
) -> np.ndarray:
    """Partition the graph built by ``make_csr`` into ``num_parts`` blocks with KaMinPar's default
    context, using all cores. The CSR only lives while it is written to the ParHIP file, so it is
    not held in memory next to KaMinPar's own copy."""
    with tempfile.TemporaryDirectory(prefix="graphshard-kaminpar-") as tmp:
        path = os.path.join(tmp, "graph.parhip")
        n = _write_csr(path, make_csr(), node_weights)
        return kaminpar_from_file(path, n, num_parts, seed, imbalance=imbalance, num_threads=num_threads)


def _write_csr(path: str, csr: UndirectedCSR, node_weights: np.ndarray | None) -> int:
    write_parhip(path, csr, node_weights)
    return csr.num_nodes

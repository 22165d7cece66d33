"""The cost model of dispatch (step 2): each rank's predicted peak of private memory, from the edges and nodes of
the partitions it builds in each phase (as counted by dispatch's first pass, or assumed even without an assignment).

A rank holds the node assignment and the relabelling of every node (``parts``, ``new2old``, ``old2new``
and the exchange's routing), pieces of edges in flight (read, routed, exchanged: bounded by the piece
size), then, one phase at a time, the edges and node rows of its partitions of that phase: received,
sorted into the CSC, and written. Coefficients fitted as an upper bound to measurements
(``benchmarks/plan_calibration.py``: R-MAT scale 10-21, 64-d features, stream assignments with balanced
edges, 2 and 4 partitions on 2 ranks; and two skewed partitions: 54 M edges at scale 21, 462 M at scale
24): all within +0-22 %. Features cost about one copy of the phase's rows; the per-edge term carries
the rest.

Disk (:func:`dispatch_disk`): the partitions, nothing else. Each is staged in ``<out>/.dispatch-<graph>/`` and moved
into place (a rename, never a copy), and the exchange runs in memory, so the peak is the written partitions
(:func:`graphshard.partition.cost.partitions_disk`) of the ranks on one machine (each host writes its ranks'
partitions into its own ``--out``); partitions an interrupted run finished are reused and need nothing more.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...chunked.readers import read_edges
from ...chunked.spec import read_metadata
from ...disk import DiskNeed
from ...memory import Estimate
from ...partition.cost import partitions_disk
from ..assignment_files import read_assignment
from .plan import row_bytes
from .state import phase_groups

DISPATCH_BASE = 205 << 20  # a dispatch rank: interpreter, torch.distributed, NumPy (measured 192 MiB)
IN_FLIGHT = 24  # per edge of the phase, up to IN_FLIGHT_CAP: pieces being read, routed and exchanged
IN_FLIGHT_CAP = 80 << 20
PER_NODE = 28  # assignment, relabelling and routing tables of every node, on every rank
PER_EDGE = 19  # a phase's received edges, their CSC and the written structure, per edge
FEATURE_COPIES = 1.0  # a phase's node and edge rows, as received


def dispatch_estimates(
    num_nodes: int, part_edges: np.ndarray, part_feature_bytes: np.ndarray, world: int, *, num_hops: int = 1
) -> list[Estimate]:
    """One estimate per rank (``method`` = ``"rank r"``) of dispatching partitions with ``part_edges``
    edges and ``part_feature_bytes`` bytes of node and edge data each, on ``world`` ranks."""
    out = []
    for r in range(world):
        phases = [[p for p in group if p % world == r] for group in phase_groups(len(part_edges), world, num_hops)]
        load = [
            min(IN_FLIGHT_CAP, IN_FLIGHT * int(part_edges[g].sum()))
            + PER_EDGE * int(part_edges[g].sum())
            + int(FEATURE_COPIES * part_feature_bytes[g].sum())
            for g in phases
            if g
        ]
        peak = max(load, default=0)
        phase = phases[load.index(peak)] if load else []
        out.append(
            Estimate(
                f"rank {r}",
                DISPATCH_BASE + PER_NODE * num_nodes + peak,
                0,
                f"building partition{'s' if len(phase) > 1 else ''} {', '.join(map(str, phase))}",
            )
        )
    return out


def even_split(total: int, parts: int) -> np.ndarray:
    """``total`` shared as evenly as possible among ``parts`` (the assumption without an assignment)."""
    return np.array([total * (p + 1) // parts - total * p // parts for p in range(parts)], dtype=np.int64)


def dispatch_disk(
    out: str | os.PathLike,
    num_nodes: int,
    num_edges: int,
    part_nodes: Sequence[int],
    *,
    part_edges: Sequence[int],
    feature_bytes: int,
    num_hops: int = 1,
    orig_nids: bool = False,
    orig_eids: bool = False,
) -> DiskNeed:
    """The predicted peak of disk of dispatch writing the partitions with ``part_nodes`` inner nodes and
    ``part_edges`` in-edges (and ``feature_bytes`` of their rows) into ``out``."""
    parts = partitions_disk(
        num_nodes,
        num_edges,
        part_nodes,
        part_edges,
        feature_bytes=feature_bytes,
        num_hops=num_hops,
        orig_nids=orig_nids,
        orig_eids=orig_eids,
    )
    return DiskNeed("dispatch", Path(out).expanduser().absolute(), {f"partitions' {k}": v for k, v in parts.items()})


def counted_estimates(
    in_dir: str, assignment: str | None, num_parts: int, world: int, *, num_hops: int = 1
) -> tuple[list[Estimate], bool]:
    """Per-rank estimates for dispatching the chunked graph at ``in_dir``: with an ``assignment`` directory,
    every partition's edges are counted (one pass over the edges, as dispatch's own first pass); without
    one, nodes and edges are assumed evenly shared. Returns the estimates and whether they were counted."""
    counts = count_partitions(in_dir, assignment, num_parts)
    return counts.estimates(world, num_hops), counts.counted


class PartCounts:
    """Each partition's inner nodes, in-edges and bytes of feature rows, counted from an assignment (one pass
    over the edges, as dispatch's own first pass) or assumed evenly shared (``counted`` False)."""

    def __init__(
        self, num_nodes: int, nodes: np.ndarray, edges: np.ndarray, feats: np.ndarray, *, counted: bool
    ) -> None:
        self.num_nodes, self.nodes, self.edges, self.feats, self.counted = num_nodes, nodes, edges, feats, counted

    def estimates(self, world: int, num_hops: int = 1) -> list[Estimate]:
        return dispatch_estimates(self.num_nodes, self.edges, self.feats, world, num_hops=num_hops)

    def disk(
        self, out: str | os.PathLike, num_hops: int = 1, orig_nids: bool = False, orig_eids: bool = False
    ) -> DiskNeed:
        """Every partition written into ``out`` (one machine)."""
        return dispatch_disk(
            out,
            self.num_nodes,
            int(self.edges.sum()),
            self.nodes.tolist(),
            part_edges=self.edges.tolist(),
            feature_bytes=int(self.feats.sum()),
            num_hops=num_hops,
            orig_nids=orig_nids,
            orig_eids=orig_eids,
        )


def count_partitions(in_dir: str, assignment: str | None, num_parts: int) -> PartCounts:
    """See :class:`PartCounts`."""
    meta = read_metadata(in_dir)
    node_row = {t: sum(row_bytes(s) for s in meta.node_data.get(t, {}).values()) for t in meta.ntypes}
    edge_row = {et: sum(row_bytes(s) for s in meta.edge_data.get(et, {}).values()) for et in meta.etypes}
    total = sum(meta.num_nodes.values())
    if assignment is None:
        nodes = sum(even_split(meta.num_nodes[t], num_parts) for t in meta.ntypes)
        edges = sum(even_split(meta.num_edges[et], num_parts) for et in meta.etypes)
        feats = sum(even_split(meta.num_nodes[t] * node_row[t], num_parts) for t in meta.ntypes) + sum(
            even_split(meta.num_edges[et] * edge_row[et], num_parts) for et in meta.etypes
        )
        zero = np.zeros(num_parts, np.int64)
        return PartCounts(
            total, np.asarray(nodes) + zero, np.asarray(edges) + zero, np.asarray(feats) + zero, counted=False
        )
    per_type, num_parts = read_assignment(assignment, meta.num_nodes)
    nodes, edges, feats = (np.zeros(num_parts, np.int64) for _ in range(3))
    for t in meta.ntypes:
        counted = np.bincount(per_type[t], minlength=num_parts)
        nodes += counted
        feats += counted * node_row[t]
    for et in meta.etypes:
        for i in range(len(meta.edges[et].paths)):
            counted = np.bincount(per_type[et[2]][read_edges(meta.edges[et], i)[1]], minlength=num_parts)
            edges += counted
            feats += counted * edge_row[et]
    return PartCounts(total, nodes, edges, feats, counted=True)

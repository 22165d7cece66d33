"""New IDs: nodes ordered by (partition, node type, original ID), edges by (partition of destination,
edge type, original ID) — docs/format.md, "ID rules"."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

import numpy as np

from .homogenize import HomoView
from .kernels import stable_order, stable_order_gathered


@dataclass(frozen=True)
class Relabelling:
    """The new numbering of nodes and edges.

    Attributes:
        num_parts: number of partitions P.
        new2old: new homogeneous node ID → original homogeneous node ID.
        old2new: the inverse of ``new2old``.
        perm: new edge ID → original homogeneous edge ID (int32 when there are fewer than 2**31 edges).
        node_bounds: (P, NT + 1); partition ``p``'s nodes of type ``t`` are new IDs
            ``[node_bounds[p, t], node_bounds[p, t + 1])`` and ``node_bounds[p, NT]`` ends the partition.
        edge_bounds: (P, ET + 1); the same for edges.
    """

    num_parts: int
    new2old: np.ndarray
    old2new: np.ndarray
    perm: np.ndarray
    _: KW_ONLY
    node_bounds: np.ndarray
    edge_bounds: np.ndarray

    def part_nodes(self, p: int) -> tuple[int, int]:
        """``[start, end)`` of partition ``p``'s new node IDs."""
        return int(self.node_bounds[p, 0]), int(self.node_bounds[p, -1])

    def part_edges(self, p: int) -> tuple[int, int]:
        """``[start, end)`` of partition ``p``'s new edge IDs."""
        return int(self.edge_bounds[p, 0]), int(self.edge_bounds[p, -1])

    def part_starts(self) -> np.ndarray:
        """First new node ID of each partition, and the total node count last (P + 1)."""
        return np.append(self.node_bounds[:, 0], self.node_bounds[-1, -1])

    def node_map(self) -> np.ndarray:
        """(NT, P, 2): per node type, per partition, ``[start, end)`` of new homogeneous IDs."""
        return np.stack([self.node_bounds[:, :-1], self.node_bounds[:, 1:]], axis=-1).transpose(1, 0, 2)

    def edge_map(self) -> np.ndarray:
        """(ET, P, 2): per edge type, per partition, ``[start, end)`` of new homogeneous edge IDs."""
        return np.stack([self.edge_bounds[:, :-1], self.edge_bounds[:, 1:]], axis=-1).transpose(1, 0, 2)


def relabel_nodes(
    parts: np.ndarray, num_parts: int, node_offsets: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(new2old, old2new, node_bounds)`` from the node assignment ``parts`` (homogeneous original order)."""
    new2old, node_off = stable_order(parts, num_parts)
    old2new = np.empty_like(new2old)
    old2new[new2old] = np.arange(new2old.shape[0], dtype=np.int64)
    return new2old, old2new, _type_bounds(new2old, node_off, node_offsets)


def edge_bounds_from_counts(counts: np.ndarray) -> np.ndarray:
    """Edge bounds (P, ET + 1) from per-(partition, edge type) edge counts (P, ET)."""
    flat = np.concatenate([[0], np.cumsum(counts.reshape(-1))])
    num_parts, num_types = counts.shape
    bounds = np.empty((num_parts, num_types + 1), dtype=np.int64)
    for p in range(num_parts):
        bounds[p] = flat[p * num_types : (p + 1) * num_types + 1]
    return bounds


def relabel(view: HomoView, parts: np.ndarray, num_parts: int) -> Relabelling:
    """Compute the new numbering from the node assignment ``parts`` (homogeneous original order)."""
    new2old, old2new, node_bounds = relabel_nodes(parts, num_parts, view.node_offsets)
    perm = np.empty(view.num_edges, dtype=np.int32 if view.num_edges < 2**31 else np.int64)
    edge_off = stable_order_gathered(view.dst, parts, num_parts, perm)
    return Relabelling(
        num_parts=num_parts,
        new2old=new2old,
        old2new=old2new,
        perm=perm,
        node_bounds=node_bounds,
        edge_bounds=_type_bounds(perm, edge_off, view.edge_offsets),
    )


def _type_bounds(order: np.ndarray, part_off: np.ndarray, type_off: np.ndarray) -> np.ndarray:
    """Within each partition ``order`` is ascending in original ID, hence grouped by type: find the cuts."""
    num_parts = part_off.shape[0] - 1
    bounds = np.empty((num_parts, type_off.shape[0]), dtype=np.int64)
    for p in range(num_parts):  # loop over partitions, not items
        lo, hi = part_off[p], part_off[p + 1]
        bounds[p] = lo + np.searchsorted(order[lo:hi], type_off)
        bounds[p, 0], bounds[p, -1] = lo, hi
    return bounds

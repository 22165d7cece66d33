"""Vectorised conversion between homogeneous IDs and (type, per-type ID) pairs.

Homogeneous IDs are type-major: every ID of type 0 comes before every ID of type 1, and so on,
each type in its per-type order. ``offsets[t]`` is the first homogeneous ID of type ``t`` and
``offsets[-1]`` the total count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .errors import IDRangeError, InputError
from .graph import is_tensor, to_numpy


def type_offsets(counts: Sequence[int]) -> np.ndarray:
    """Return the ``len(counts) + 1`` cumulative offsets of per-type counts (int64)."""
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(np.asarray(counts, dtype=np.int64), out=offsets[1:])
    return offsets


def consecutive(ids: np.ndarray) -> slice | None:
    """``slice(a, b)`` when ``ids`` are exactly ``a, a + 1, ..., b - 1`` (in that order), else None."""
    if not ids.size or int(ids[-1]) - int(ids[0]) != ids.size - 1:
        return None
    return slice(int(ids[0]), int(ids[-1]) + 1) if ids.size < 2 or bool((np.diff(ids) == 1).all()) else None


def beyond_int64(arr: np.ndarray) -> int | None:
    """Position of the first value of the integer array ``arr`` that int64 cannot hold, or None.

    Only unsigned 64-bit values of 2**63 or more qualify; a cast to int64 would turn them into negative
    numbers (2**64 - 1 into -1), so every check runs before the cast and names the value as given."""
    if arr.dtype.kind != "u" or arr.dtype.itemsize < 8 or not arr.size:
        return None
    big = arr > np.iinfo(np.int64).max
    return int(np.argmax(big)) if big.any() else None


def as_id_array(ids: Any, what: str = "IDs") -> np.ndarray:
    """Return ``ids`` (tensor, array, list or scalar) as a 1-D int64 NumPy array, copying only if needed.
    An unsigned ID int64 cannot hold raises :class:`IDRangeError` naming it as given."""
    arr = to_numpy(ids)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"{what} must be integers, got dtype {arr.dtype}")
    arr = arr.reshape(-1)
    big = beyond_int64(arr)
    if big is not None:
        raise IDRangeError(f"{what}: {int(arr[big])} at position {big} is out of range (IDs are below 2**63)")
    return arr.astype(np.int64, copy=False)


def check_range(ids: np.ndarray, upper: int, what: str) -> None:
    """Raise :class:`IDRangeError` naming the first ID of ``ids`` outside ``[0, upper)``."""
    if ids.size == 0:
        return
    bad = (ids < 0) | (ids >= upper)
    if bad.any():
        first = int(ids[np.argmax(bad)])
        raise IDRangeError(f"{what} {first} is out of range [0, {upper}) ({int(bad.sum())} such IDs)")


def to_homo(type_ids: np.ndarray, per_type_ids: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Map (type, per-type ID) pairs to homogeneous IDs; raises on per-type IDs out of their type's range."""
    counts = offsets[1:] - offsets[:-1]
    check_range(type_ids, len(counts), "type ID")
    bad = (per_type_ids < 0) | (per_type_ids >= counts[type_ids])
    if bad.any():
        i = int(np.argmax(bad))
        raise IDRangeError(
            f"per-type ID {int(per_type_ids[i])} is out of range [0, {int(counts[type_ids[i]])}) "
            f"for type {int(type_ids[i])}"
        )
    return offsets[type_ids] + per_type_ids


def to_hetero(homo_ids: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Map homogeneous IDs to ``(type_ids, per_type_ids)``; raises on IDs out of ``[0, offsets[-1])``."""
    check_range(homo_ids, int(offsets[-1]), "homogeneous ID")
    type_ids = np.searchsorted(offsets, homo_ids, side="right") - 1
    return type_ids, homo_ids - offsets[type_ids]


class IDConverter:
    """Convert node and edge IDs between per-type and homogeneous spaces.

    Node (edge) homogeneous IDs are ordered by type in the order the types are listed, then by
    per-type ID — the numbering the chunked graph format and DGL's distributed pipeline use.
    Tensors in give tensors out; NumPy arrays in give NumPy arrays out.

    Args:
        num_nodes_per_type: node type → number of nodes, in the node type order.
        num_edges_per_type: canonical edge type (``src:rel:dst``) → number of edges, in the edge type
            order; None: no edge types (only node IDs are converted).
    """

    def __init__(self, num_nodes_per_type: Mapping[str, int], num_edges_per_type: Mapping[str, int] | None = None):
        self.ntypes = list(num_nodes_per_type)
        self.etypes = list(num_edges_per_type or {})
        self._ntype_id = {t: i for i, t in enumerate(self.ntypes)}
        self._etype_id = {t: i for i, t in enumerate(self.etypes)}
        self.node_offsets = type_offsets([int(num_nodes_per_type[t]) for t in self.ntypes])
        self.edge_offsets = type_offsets([int((num_edges_per_type or {})[t]) for t in self.etypes])

    @classmethod
    def from_metadata(cls, meta: Mapping[str, Any]) -> IDConverter:
        """Build from chunked-format metadata.

        Args:
            meta: the chunked graph's ``metadata.json`` as a mapping: ``node_type``, ``edge_type`` and
                either ``num_nodes_per_type``/``num_edges_per_type`` or the older per-chunk counts
                ``num_nodes_per_chunk``/``num_edges_per_chunk``.

        Returns:
            The converter for the graph's node and edge types.

        Raises:
            InputError: a key is missing, or a count list's length differs from its type list's.
        """
        try:
            nodes = _per_type_counts(meta, "node_type", "num_nodes_per_type", "num_nodes_per_chunk")
            edges = _per_type_counts(meta, "edge_type", "num_edges_per_type", "num_edges_per_chunk")
        except KeyError as exc:
            raise InputError(f"chunked metadata: missing key {exc.args[0]!r}") from None
        return cls(nodes, edges)

    def _type_id(self, table: dict[str, int], name: str | int, kind: str) -> int:
        if isinstance(name, (int, np.integer)):
            if not 0 <= int(name) < len(table):
                raise IDRangeError(f"{kind} type ID {name} is out of range [0, {len(table)})")
            return int(name)
        if name not in table:
            raise InputError(f"unknown {kind} type {name!r}; known: {list(table)}")
        return table[name]

    def node_to_homo(self, ntype: str | int, ids: Any) -> Any:
        """Per-type node IDs of ``ntype`` → homogeneous node IDs.

        Args:
            ntype: the node type, by name or by its index in the type order.
            ids: per-type node IDs (tensor, array, list or scalar).

        Returns:
            The homogeneous node IDs, a tensor for a tensor given, else a NumPy array.

        Raises:
            InputError: an unknown node type name, or IDs that are not integers.
            IDRangeError: a type index or an ID out of range.
        """
        return self._to_homo(self._type_id(self._ntype_id, ntype, "node"), ids, self.node_offsets)

    def edge_to_homo(self, etype: str | int, ids: Any) -> Any:
        """Per-type edge IDs of ``etype`` → homogeneous edge IDs.

        Args:
            etype: the edge type, by canonical name ``src:rel:dst`` or by its index in the type order.
            ids: per-type edge IDs (tensor, array, list or scalar).

        Returns:
            The homogeneous edge IDs, a tensor for a tensor given, else a NumPy array.

        Raises:
            InputError: an unknown edge type name, or IDs that are not integers.
            IDRangeError: a type index or an ID out of range.
        """
        return self._to_homo(self._type_id(self._etype_id, etype, "edge"), ids, self.edge_offsets)

    def node_to_hetero(self, ids: Any) -> tuple[Any, Any]:
        """Homogeneous node IDs → ``(node type IDs, per-type IDs)``.

        Args:
            ids: homogeneous node IDs (tensor, array, list or scalar).

        Returns:
            ``(node type IDs, per-type IDs)``, tensors for a tensor given, else NumPy arrays.

        Raises:
            InputError: IDs that are not integers.
            IDRangeError: an ID outside ``[0, number of nodes)``.
        """
        return self._to_hetero(ids, self.node_offsets)

    def edge_to_hetero(self, ids: Any) -> tuple[Any, Any]:
        """Homogeneous edge IDs → ``(edge type IDs, per-type IDs)``.

        Args:
            ids: homogeneous edge IDs (tensor, array, list or scalar).

        Returns:
            ``(edge type IDs, per-type IDs)``, tensors for a tensor given, else NumPy arrays.

        Raises:
            InputError: IDs that are not integers.
            IDRangeError: an ID outside ``[0, number of edges)``.
        """
        return self._to_hetero(ids, self.edge_offsets)

    @staticmethod
    def _to_homo(type_id: int, ids: Any, offsets: np.ndarray) -> Any:
        arr = as_id_array(ids)
        out = to_homo(np.full(arr.shape, type_id, dtype=np.int64), arr, offsets)
        return _like(ids, out)

    @staticmethod
    def _to_hetero(ids: Any, offsets: np.ndarray) -> tuple[Any, Any]:
        t, p = to_hetero(as_id_array(ids), offsets)
        return _like(ids, t), _like(ids, p)


def _per_type_counts(meta: Mapping[str, Any], types_key: str, counts_key: str, chunks_key: str) -> dict[str, int]:
    types = list(meta[types_key])
    if counts_key in meta:
        counts = [int(c) for c in meta[counts_key]]
    elif chunks_key in meta:
        counts = [int(sum(c)) for c in meta[chunks_key]]
    else:
        raise KeyError(counts_key)
    if len(counts) != len(types):
        raise InputError(f"chunked metadata: {counts_key!r} has {len(counts)} entries for {len(types)} types")
    return dict(zip(types, counts))


def _like(template: Any, arr: np.ndarray) -> Any:
    if is_tensor(template):
        import torch

        return torch.from_numpy(arr)
    return arr

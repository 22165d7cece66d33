"""One partition as a self-contained graph on PyG's ``FeatureStore``/``GraphStore`` interfaces.

Both stores address the partition's *own* items: node ``i`` of type ``t`` is the partition's ``i``-th
node of that type (global per-type ID ``id_offset(t) + i``), edge ``j`` of an edge type its ``j``-th
owned edge of that type. With a single partition these are the global per-type IDs. Features are
memory-mapped from the partition's files, which are never written: puts, updates and removes go to the
store object's in-memory overlay (:class:`~graphshard.distributed.stores.base.StoredFeatureStore`); the
graph store is :class:`~graphshard.distributed.stores.graph.LocalGraphStore`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch_geometric.data.feature_store import TensorAttr

from ...errors import IDRangeError
from ...format.load import Partition
from ...graph import parse_etype
from ...ids import as_id_array
from ...sparse import CSRRows
from .base import Group, ReadOnlyStoreError, Rows, StoredFeatureStore, TypeNames, own_ranges
from .graph import LocalGraphStore
from .partitions import Served, Stacked, StoredTensor, stacked_feats
from .rows import gather_rows, put_rows, take_rows

__all__ = ["LocalFeatureStore", "LocalGraphStore", "ReadOnlyStoreError"]


class LocalFeatureStore(StoredFeatureStore):
    """Node and edge features of one partition's own nodes and edges, a PyG ``FeatureStore``.

    Memory-mapped, never copied whole. ``index`` is a row of the partition (see the module doc);
    `get_tensor_from_global_id` takes global per-type IDs. Groups: node types and canonical edge types,
    ``None``/``(None, None)`` in a single-type graph. A missing group or tensor raises ``KeyError``.

    Writes (PyG's ``put_tensor``/``update_tensor``/``remove_tensor``) change this object's in-memory overlay
    only, never the partition's files (see `StoredFeatureStore`): e.g.
    ``fs.put_tensor(torch.zeros(n, 1), "venue", "x", index=None)`` gives a featureless node type the
    placeholder PyG's heterogeneous loaders need. A `DistFeatureStore` serving this partition to other ranks
    serves its stored data, never this overlay.

    Args:
        part: the loaded partition (`load_partition`), or several stored partitions served as one.
        part_id: the partition's ID (in the book of ``part``).
        pyg_names: renames node data for PyG; None: ``feat``→``x``, ``label``→``y`` (both names read).
    """

    def __init__(self, part: Partition | Served, part_id: int, pyg_names: Mapping[str, str] | None = None):
        node_feats: Mapping[str, StoredTensor]
        edge_feats: Mapping[str, StoredTensor]
        if isinstance(part, Served):  # several stored partitions served as one: rows read piece by piece
            book, node_feats, edge_feats = (
                part.book,
                stacked_feats(part.parts, "node_feats"),
                stacked_feats(part.parts, "edge_feats"),
            )
        else:
            book, node_feats, edge_feats = part.partition_book, part.node_feats, part.edge_feats
        self.part_id = part_id
        self.ranges = own_ranges(book, part_id)
        self._tensors: dict[tuple[Group, str], StoredTensor] = {}
        for feats, parse in ((node_feats, str), (edge_feats, parse_etype)):
            for key, tensor in feats.items():
                group, name = key.rsplit("/", 1)
                self._tensors[(parse(group), name)] = tensor
        schema = {k: (_dtype(t), tuple(t.shape[1:])) for k, t in self._tensors.items()}
        super().__init__(
            TypeNames(book.ntypes, book.canonical_etypes),
            schema,
            {g: r.size for g, r in self.ranges.items()},
            pyg_names,
        )

    def id_offset(self, group: Any) -> int:
        """Global per-type ID of row 0 of ``group``.

        Args:
            group: a node type, canonical edge type, or PyG's ``None``/``(None, None)``.

        Returns:
            The ID of the partition's first item of the type.

        Raises:
            KeyError: no such group.
        """
        return self.ranges[self.types.group(group)].start

    def to_rows(self, group: Any, ids: Any) -> torch.Tensor:
        """Rows of global per-type ``ids`` of ``group``.

        Args:
            group: a node type, canonical edge type, or PyG's ``None``/``(None, None)``.
            ids: global per-type IDs this partition owns (tensor, array, list or scalar).

        Returns:
            The partition's row of each ID (int64).

        Raises:
            KeyError: no such group.
            InputError: IDs that are not integers.
            IDRangeError: an ID owned by another partition.
        """
        g = self.types.group(group)
        start, count, _ = self.ranges[g]
        arr = as_id_array(ids, f"IDs of {g!r}")
        rows = arr - start
        bad = (rows < 0) | (rows >= count)
        if bad.any():
            raise IDRangeError(
                f"{g!r}: ID {int(arr[np.argmax(bad)])} is not owned by partition {self.part_id} "
                f"(it owns [{start}, {start + count}))"
            )
        return torch.from_numpy(rows)

    def get_tensor_from_global_id(self, group: Any, attr_name: str, ids: Any) -> torch.Tensor:
        """Rows of ``group``/``attr_name`` for global per-type ``ids`` this partition owns.

        Args:
            group: a node type, canonical edge type, or PyG's ``None``/``(None, None)``.
            attr_name: the tensor's name.
            ids: global per-type IDs this partition owns (tensor, array, list or scalar).

        Returns:
            The rows, as ``get_tensor`` reads them (the overlay first).

        Raises:
            KeyError: no such group or tensor.
            InputError: IDs that are not integers.
            IDRangeError: an ID owned by another partition.
        """
        return self.get_tensor(group, attr_name, index=self.to_rows(group, ids))

    def stored_from_global_id(self, group: Any, attr_name: str, ids: Any) -> torch.Tensor:
        """Rows of the *stored* tensor ``group``/``attr_name`` for global per-type ``ids`` this partition owns.

        Whatever this object's overlay holds: what other ranks are served.

        Args:
            group: a node type, canonical edge type, or PyG's ``None``/``(None, None)``.
            attr_name: the tensor's name.
            ids: global per-type IDs this partition owns (tensor, array, list or scalar).

        Returns:
            The stored rows.

        Raises:
            KeyError: no such group or stored tensor.
            InputError: IDs that are not integers.
            IDRangeError: an ID owned by another partition.
        """
        return self._read(*self._stored_key(group, attr_name), self.to_rows(group, ids))

    def stored_into(self, group: Any, attr_name: str, ids: np.ndarray, out: torch.Tensor, *, at: np.ndarray) -> None:
        """`stored_from_global_id` of dense rows, written to ``out[at]``.

        In one pass from a plain stored tensor: no intermediate copy.

        Args:
            group: a node type, canonical edge type, or PyG's ``None``/``(None, None)``.
            attr_name: the tensor's name.
            ids: global per-type IDs this partition owns.
            out: the tensor the rows are written to.
            at: the row of ``out`` each ID's row goes to.

        Raises:
            KeyError: no such group or stored tensor.
            IDRangeError: an ID owned by another partition.
        """
        key = self._stored_key(group, attr_name)
        rows = self.to_rows(group, ids)
        tensor = self._tensors[key]
        if isinstance(tensor, (Stacked, CSRRows)):
            put_rows(out, torch.from_numpy(at), self._read(*key, rows))
        else:
            gather_rows(out, at, tensor, rows.numpy())

    def _stored_key(self, group: Any, name: str) -> tuple[Group, str]:
        g = self.types.group(group)
        key = (g, self._alias.get((g, name), name))
        if key not in self._tensors:
            raise KeyError(
                f"no stored tensor {name!r} in group {group!r} ({g!r}); it has "
                f"{sorted(n for t, n in self._tensors if t == g)}"
            )
        return key

    def is_sparse(self, group: Any, name: str) -> bool:
        """Whether ``group``/``name`` is read from a CSR tensor (`graphshard.sparse`; rows are still read dense).

        Args:
            group: a node type, canonical edge type, or PyG's ``None``/``(None, None)``.
            name: the tensor's name.

        Returns:
            True for a stored CSR tensor; False once the overlay holds writes to it.

        Raises:
            KeyError: no such group or tensor.
        """
        key = self._key(TensorAttr(group, name))
        return key not in self._written and self.stored_is_sparse(group, name)

    def stored_is_sparse(self, group: Any, name: str) -> bool:
        """Whether the stored tensor ``group``/``name`` is held as CSR, whatever the overlay holds.

        Args:
            group: a node type, canonical edge type, or PyG's ``None``/``(None, None)``.
            name: the tensor's name.

        Returns:
            True for a stored CSR tensor.

        Raises:
            KeyError: no such group or stored tensor.
        """
        t = self._tensors[self._stored_key(group, name)]
        return isinstance(t, CSRRows) or (isinstance(t, Stacked) and isinstance(t.pieces[0], CSRRows))

    def nonzeros_from_global_id(self, group: Any, name: str, ids: Any) -> tuple[torch.Tensor, ...]:
        """The non-zeros of a stored CSR feature's rows for global per-type ``ids`` (the overlay is not read).

        Args:
            group: a node type, canonical edge type, or PyG's ``None``/``(None, None)``.
            name: the feature's name.
            ids: global per-type IDs this partition owns (tensor, array, list or scalar).

        Returns:
            ``(count per row, columns, values)`` tensors, as `CSRRows.nonzeros` gives them.

        Raises:
            KeyError: no such group or stored tensor.
            IDRangeError: an ID owned by another partition.
        """
        rows = self.to_rows(group, ids).numpy()
        t = self._tensors[self._stored_key(group, name)]
        assert isinstance(t, (CSRRows, Stacked)), "asked only of CSR features (see stored_is_sparse)"
        return t.nonzeros(rows)

    def _read(self, group: Group, name: str, rows: Rows) -> torch.Tensor:
        tensor = self._tensors[(group, name)]
        if isinstance(tensor, Stacked):
            return tensor.read(rows)
        if isinstance(tensor, CSRRows):
            return tensor.read(rows) if isinstance(rows, torch.Tensor) else torch.from_numpy(tensor[rows])
        if isinstance(rows, torch.Tensor):
            return take_rows(tensor, rows)  # see rows.py: faster than tensor[rows] and index_select
        return tensor[rows]  # a view of the memory-mapped file


def _dtype(t: Any) -> torch.dtype:
    if isinstance(t, CSRRows):
        return t.torch_dtype
    return t.dtype

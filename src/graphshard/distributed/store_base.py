"""What graphshard's PyG stores share: group and edge-type names (PyG's ``None`` convention for
single-type graphs), every index form PyG passes, and the read-only :class:`FeatureStore` base.

A graph with one node type and at most one edge type is *single-type*: PyG sees it as homogeneous,
so its node features are group ``None``, its edge features group ``(None, None)`` and its edges
edge type ``None``; the type names (``"_N"``, ``("_N", "_E", "_N")``) are accepted too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Union

import numpy as np
import torch
from torch_geometric.data.feature_store import AttrView, FeatureStore, TensorAttr

from ..errors import IDRangeError, InputError
from ..graph import EType, parse_etype

Group = Union[str, EType]
Rows = Union[slice, int, torch.Tensor]
PYG_NAMES: Mapping[str, str] = {"feat": "x", "label": "y"}  # graphshard's node data names → PyG's
_EDGE_NONE = (None, None)


class OwnRange(NamedTuple):
    """The items of one type a partition owns: global per-type IDs ``[start, start + count)``, the
    first of them ``homo`` as a homogeneous ID."""

    start: int
    count: int
    homo: int


def own_ranges(book: Any, part_id: int) -> dict[Group, OwnRange]:
    """:class:`OwnRange` of every node type and canonical edge type in partition ``part_id``."""
    out: dict[Group, OwnRange] = {}
    for kind, types in (("n", book.ntypes), ("e", book.canonical_etypes)):
        for t in types:
            lo, hi = book.node_range(part_id, t) if kind == "n" else book.edge_range(part_id, t)
            if hi == lo:
                out[t] = OwnRange(0, 0, 0)
                continue
            homo = book.map_to_homo_nid([lo], t) if kind == "n" else book.map_to_homo_eid([lo], t)
            out[t] = OwnRange(lo, hi - lo, int(homo[0]))
    return out


class ReadOnlyStoreError(InputError):
    """A write (put, update or remove) to a read-only feature store."""


class TypeNames:
    """The node and edge types of one graph, and how PyG names them."""

    def __init__(self, ntypes: list[str], etypes: list[EType]):
        self.ntypes, self.etypes = list(ntypes), [tuple(e) for e in etypes]
        self.single = len(self.ntypes) == 1 and len(self.etypes) <= 1

    def group(self, name: Any) -> Group:
        """The node type or canonical edge type PyG's ``name`` means; ``KeyError`` if none."""
        if self.single and (name is None or name == _EDGE_NONE):
            return self.ntypes[0] if name is None else self.etype(None)
        if isinstance(name, str) and name in self.ntypes:
            return name
        return self.etype(name)

    def etype(self, name: Any) -> EType:
        """The canonical edge type PyG's edge type ``name`` means; ``KeyError`` if none."""
        if name is None or name == _EDGE_NONE:
            if self.single and self.etypes:
                return self.etypes[0]
        else:
            key = _as_etype(name)
            if key in self.etypes:
                return key
        what = "None (the graph has several types)" if name is None and not self.single else repr(name)
        raise KeyError(f"no group or edge type {what}; node types {self.ntypes}, edge types {self.etypes}"
                       + (" (or None / (None, None), single-type graph)" if self.single else ""))

    def public(self, group: Group) -> Any:
        """The name PyG gives ``group``: ``None`` / ``(None, None)`` in a single-type graph."""
        if not self.single:
            return group
        return None if isinstance(group, str) else _EDGE_NONE

    def public_etype(self, etype: Any) -> Any:
        """The edge type PyG's loaders expect for ``etype``: ``None`` in a single-type graph."""
        return None if self.single and etype in self.etypes else etype


def _as_etype(name: Any) -> Any:
    if isinstance(name, str) and name.count(":") == 2:
        return parse_etype(name)
    return tuple(name) if isinstance(name, (tuple, list)) else name


def as_rows(index: Any, count: int, what: str) -> Rows:
    """PyG's ``index`` (None, slice, int, bool mask, or IDs as tensor/array/list) as rows of a tensor of
    ``count`` rows: a slice or int (viewed, never copied) or an int64 tensor. Raises
    :class:`IDRangeError` naming ``what`` for an index outside ``[0, count)``."""
    if index is None:
        return slice(None)
    if isinstance(index, slice):
        return index
    if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
        _check(np.array([index]), count, what)
        return int(index)
    tensor = index.detach().cpu() if isinstance(index, torch.Tensor) else torch.as_tensor(np.asarray(index))
    if tensor.dtype == torch.bool:
        if tensor.shape != (count,):
            raise IDRangeError(f"{what}: a boolean index needs {count} entries, got shape {tuple(tensor.shape)}")
        return tensor.nonzero().view(-1)
    if tensor.numel() and (tensor.is_floating_point() or tensor.is_complex()):
        raise InputError(f"{what}: index must hold integers, got {tensor.dtype}")
    tensor = tensor.to(torch.int64).reshape(-1)
    _check(tensor.numpy(), count, what)
    return tensor


def _check(ids: np.ndarray, count: int, what: str) -> None:
    if ids.size:
        bad = (ids < 0) | (ids >= count)
        if bad.any():
            raise IDRangeError(f"{what}: ID {int(ids[np.argmax(bad)])} is out of range [0, {count}) "
                               f"({int(bad.sum())} such IDs)")


def num_rows(rows: Rows, count: int) -> tuple[int, ...]:
    """The leading shape ``rows`` selects out of ``count`` rows (``()`` for a single int row)."""
    if isinstance(rows, slice):
        return (len(range(*rows.indices(count))),)
    return () if isinstance(rows, int) else (int(rows.numel()),)


class ReadOnlyFeatureStore(FeatureStore):
    """Base of graphshard's feature stores: PyG's read interface over tensors of a fixed schema.

    ``schema`` maps ``(node type or canonical edge type, name)`` to ``(dtype, row shape)``; ``counts``
    gives each type's number of rows. Node data named in ``pyg_names`` is listed under PyG's name
    (``feat`` → ``x``, ``label`` → ``y``) and readable under both. :meth:`get_all_tensor_attrs` lists
    edge data only for multi-type graphs: PyG's homogeneous loaders gather every listed tensor by node
    index. Writes raise :class:`ReadOnlyStoreError`. Subclasses implement :meth:`_read`.
    """

    def __init__(self, types: TypeNames, schema: Mapping[tuple[Group, str], tuple[torch.dtype, tuple[int, ...]]],
                 counts: Mapping[Group, int], pyg_names: Mapping[str, str] | None = None):
        super().__init__()
        self.types, self.schema, self.counts = types, dict(schema), dict(counts)
        self.pyg_names = renames = dict(PYG_NAMES if pyg_names is None else pyg_names)
        self._alias: dict[tuple[Group, str], str] = {}  # (group, PyG name) → stored name
        self._listed: dict[tuple[Group, str], str] = {}  # (group, stored name) → listed name
        for group, name in self.schema:
            new = renames.get(name, name) if isinstance(group, str) else name
            if new != name and (group, new) in self.schema:  # the graph already has that name: keep ours
                new = name
            self._listed[(group, name)] = new
            self._alias[(group, new)] = name

    # -- names ---------------------------------------------------------------------------------------
    def _key(self, attr: TensorAttr) -> tuple[Group, str]:
        group = self.types.group(attr.group_name)
        name = attr.attr_name
        key = (group, self._alias.get((group, name), name))
        if key not in self.schema:
            have = sorted(n for g, n in self._listed.items() if g[0] == group)
            raise KeyError(f"no tensor {name!r} in group {attr.group_name!r} ({group!r}); it has {have}")
        return key

    def attr_names(self, group: Any) -> list[str]:
        """The names data of ``group`` is stored under (graphshard's names, e.g. ``feat``)."""
        g = self.types.group(group)
        return [n for t, n in self.schema if t == g]

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        return [TensorAttr(self.types.public(g), self._listed[(g, n)]) for g, n in self.schema
                if isinstance(g, str) or not self.types.single]

    # -- reads ---------------------------------------------------------------------------------------
    def _read(self, group: Group, name: str, rows: Rows) -> torch.Tensor:
        """Rows ``rows`` (already checked against ``counts[group]``) of tensor ``name`` of ``group``."""
        raise NotImplementedError

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor:
        group, name = self._key(attr)
        return self._read(group, name, as_rows(attr.index, self.counts[group], f"{group!r}/{name!r}"))

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...] | None:
        """The shape :meth:`get_tensor` would return, or None when there is no such tensor (PyG's rule)."""
        try:
            group, name = self._key(attr)
        except KeyError:
            return None
        rows = as_rows(attr.index, self.counts[group], f"{group!r}/{name!r}")
        return (*num_rows(rows, self.counts[group]), *self.schema[(group, name)][1])

    def view(self, *args: Any, **kwargs: Any) -> AttrView:
        if args == (None,) and not kwargs:  # PyG's cast reads a bare None as "no attribute": here, group None
            return AttrView(self, TensorAttr(None))
        return super().view(*args, **kwargs)

    def __getitem__(self, key: Any) -> Any:
        return self.view(None) if key is None else super().__getitem__(key)

    # -- writes --------------------------------------------------------------------------------------
    def _refuse(self, what: str, *args: Any, **kwargs: Any) -> bool:
        try:
            attr = self._tensor_attr_cls.cast(*args, **kwargs)
            where = f" {attr.group_name!r}/{attr.attr_name!r}"
        except Exception:  # the arguments do not even name a tensor: the refusal still stands
            where = ""
        raise ReadOnlyStoreError(
            f"{type(self).__name__} is read-only: cannot {what}{where}. It serves a partition's files, "
            "shared by every process that reads them; keep extra per-node data in a DistTensor instead")

    def put_tensor(self, tensor: Any, *args: Any, **kwargs: Any) -> bool:
        return self._refuse("put a tensor", *args, **kwargs)

    def update_tensor(self, tensor: Any, *args: Any, **kwargs: Any) -> bool:
        return self._refuse("update a tensor", *args, **kwargs)

    def remove_tensor(self, *args: Any, **kwargs: Any) -> bool:
        return self._refuse("remove a tensor", *args, **kwargs)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._refuse("put a tensor", key)

    def __delitem__(self, key: Any) -> None:
        self._refuse("remove a tensor", key)

    def _put_tensor(self, tensor: Any, attr: TensorAttr) -> bool:
        return self._refuse("put a tensor", attr)

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        return self._refuse("remove a tensor", attr)

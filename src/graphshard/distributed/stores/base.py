"""What graphshard's PyG stores share: group and edge-type names (PyG's ``None`` convention for
single-type graphs), every index form PyG passes, and the :class:`FeatureStore` base with its overlay.

A graph with one node type and at most one edge type is *single-type*: PyG sees it as homogeneous,
so its node features are group ``None``, its edge features group ``(None, None)`` and its edges
edge type ``None``; the type names (``"_N"``, ``("_N", "_E", "_N")``) are accepted too. Writes go to an
in-memory overlay of each store object and never to the stored data (see :class:`StoredFeatureStore`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import numpy as np
import torch
from torch_geometric.data.feature_store import AttrView, FeatureStore, TensorAttr

from ...errors import IDRangeError, InputError
from ...graph import EType, parse_etype
from .overlay import Rows, Written, as_written_tensor, full_or_rows, num_rows

Group = str | EType
PYG_NAMES: Mapping[str, str] = {"feat": "x", "label": "y"}  # graphshard's node data names → PyG's
_EDGE_NONE = (None, None)


class OwnRange(NamedTuple):
    """The items of one type a partition owns: global per-type IDs ``[start, start + size)``, the
    first of them ``homo`` as a homogeneous ID."""

    start: int
    size: int  # not ``count``: a NamedTuple's field would hide tuple.count
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
    """A write to a read-only feature store.

    graphshard's stores take writes in memory (see `StoredFeatureStore`) and no longer raise it; kept for
    code that catches it.
    """


class TypeNames:
    """The node and edge types of one graph, and how PyG names them."""

    def __init__(self, ntypes: list[str], etypes: list[EType]):
        self.ntypes = list(ntypes)
        # canonical edge types: three names each (lists when they come from JSON), as tuples
        self.etypes = [cast(EType, tuple(e)) for e in etypes]
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
        raise KeyError(
            f"no group or edge type {what}; node types {self.ntypes}, edge types {self.etypes}"
            + (" (or None / (None, None), single-type graph)" if self.single else "")
        )

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
            raise IDRangeError(
                f"{what}: ID {int(ids[np.argmax(bad)])} is out of range [0, {count}) ({int(bad.sum())} such IDs)"
            )


Key = tuple[Any, Any]  # (group, name): a stored tensor's, or one written in memory


@dataclass(eq=False, repr=False)
class _TensorAttr(TensorAttr):
    """PyG's ``TensorAttr`` that also takes a NumPy index (as a tensor, without a copy): PyG's own compares
    the index with its "unset" marker, which a NumPy array answers element by element. It equals, and prints
    as, the ``TensorAttr`` of the same fields (PyG's views compare them)."""

    def __post_init__(self) -> None:
        index: Any = vars(self)["index"]  # PyG's field (untyped for mypy: PyG ships no stubs)
        if isinstance(index, np.ndarray):
            self.index = torch.from_numpy(index)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorAttr):
            return NotImplemented
        return (self.group_name, self.attr_name, self.index) == (other.group_name, other.attr_name, other.index)

    def __repr__(self) -> str:
        return f"TensorAttr(group_name={self.group_name!r}, attr_name={self.attr_name!r}, index={self.index!r})"


class StoredFeatureStore(FeatureStore):
    """Base of graphshard's feature stores: PyG's ``FeatureStore`` over stored tensors of a fixed schema,
    with an in-memory overlay that takes writes.

    ``schema`` maps ``(node type or canonical edge type, name)`` to ``(dtype, row shape)`` of the stored
    tensors; ``counts`` gives each type's number of rows. Node data named in ``pyg_names`` is listed under
    PyG's name (``feat`` → ``x``, ``label`` → ``y``) and readable under both. :meth:`get_all_tensor_attrs`
    lists edge data only for multi-type graphs: PyG's homogeneous loaders gather every listed tensor by
    node index. Subclasses implement :meth:`_read` (stored rows).

    **Writes** (``put_tensor``, ``update_tensor``, ``remove_tensor``, ``store[...] = t``, ``del store[...]``)
    go to an overlay held in this Python object only; the stored data and the partition's files are never
    modified. Reads see the overlay first, then the stored data. A put of every row (index ``None``, a
    full slice, or any index naming each row once) keeps the tensor whole (by reference, as PyG's own
    stores do), with any dtype and row shape: a new tensor (e.g. a ``time`` attribute, or a placeholder
    ``x`` for a node type without features), or one replacing a stored tensor. A put of some rows
    updates those rows of an existing tensor (same row shape, a dtype that promotes to its dtype), without
    copying the stored tensor. ``update_tensor`` is ``put_tensor``. ``remove_tensor`` removes the whole
    tensor whatever the index (as PyG's reference store does): a stored tensor is hidden from this object
    only. Puts into a group the graph does not have make a new group (multi-type graphs only), whose row
    count is that of its first tensor. The overlay is per process and per object: other store objects,
    other processes and other ranks never see it.
    """

    def __init__(
        self,
        types: TypeNames,
        schema: Mapping[tuple[Group, str], tuple[torch.dtype, tuple[int, ...]]],
        counts: Mapping[Group, int],
        pyg_names: Mapping[str, str] | None = None,
    ):
        super().__init__(tensor_attr_cls=_TensorAttr)
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
        self._written: dict[Key, Written] = {}  # the overlay: tensors written in memory
        self._hidden: set[Key] = set()  # stored tensors removed from this object

    # -- names ---------------------------------------------------------------------------------------
    def _group(self, name: Any, create: bool = False) -> Any:
        """The group PyG's ``name`` means: a node or edge type of the graph, or a group made by a put
        (``create``: a new one may be made). ``KeyError`` if none."""
        try:
            return self.types.group(name)
        except KeyError:
            key = _as_etype(name)
            try:
                known = any(g == key for g, _ in self._written)
            except TypeError:  # not even comparable/hashable: no such group
                known = False
            if known or (create and not self.types.single and _hashable(key)):
                return key
            raise

    def _key(self, attr: TensorAttr) -> Key:
        """The ``(group, name)`` of a tensor this store can read (written, or stored and not removed)."""
        group = self._group(attr.group_name)
        name = attr.attr_name
        key = (group, self._alias.get((group, name), name))
        if key not in self._written and (key not in self.schema or key in self._hidden):
            have = sorted(str(n) for g, n in self._names() if g == group)
            raise KeyError(f"no tensor {name!r} in group {attr.group_name!r} ({group!r}); it has {have}")
        return key

    def _names(self) -> list[tuple[Key, Any]]:
        """``((group, name), listed name)`` of every readable tensor: stored ones first, in schema order."""
        out = [(k, self._listed[k]) for k in self.schema if k not in self._hidden]
        return out + [(k, k[1]) for k in self._written if k not in self.schema]

    def _count(self, group: Any) -> int:
        if group in self.counts:
            return self.counts[group]
        return next(w.count for (g, _), w in self._written.items() if g == group)

    def _spec(self, key: Key) -> tuple[torch.dtype, tuple[int, ...]]:
        """``(dtype, row shape)`` of what reads of ``key`` return."""
        written = self._written.get(key)
        return written.spec(self.schema.get(key)) if written is not None else self.schema[key]

    def attr_names(self, group: Any) -> list[str]:
        """The names data of ``group`` can be read under (graphshard's stored names, e.g. ``feat``, and
        the names of tensors written to this object; not those removed)."""
        g = self._group(group)
        return [n for (t, n), _ in self._names() if t == g]

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        return [
            TensorAttr(self.types.public(g) if g in self.counts else g, listed)
            for (g, _), listed in self._names()
            if isinstance(g, str) or not self.types.single
        ]

    # -- reads ---------------------------------------------------------------------------------------
    def _read(self, group: Group, name: str, rows: Rows) -> torch.Tensor:
        """Rows ``rows`` (already checked against ``counts[group]``) of stored tensor ``name`` of ``group``."""
        raise NotImplementedError

    def _read_key(self, key: Key, rows: Rows) -> torch.Tensor:
        """Rows ``rows`` of readable tensor ``key``: the overlay's, else the stored ones."""
        written = self._written.get(key)
        if written is None:
            return self._read(key[0], key[1], rows)
        return written.read(rows, lambda r: self._read(key[0], key[1], r))

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor:
        key = self._key(attr)
        return self._read_key(key, as_rows(attr.index, self._count(key[0]), f"{key[0]!r}/{key[1]!r}"))

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...] | None:
        """The shape :meth:`get_tensor` would return, or None when there is no such tensor (PyG's rule)."""
        try:
            key = self._key(attr)
        except KeyError:
            return None
        count = self._count(key[0])
        rows = as_rows(attr.index, count, f"{key[0]!r}/{key[1]!r}")
        return (*num_rows(rows, count), *self._spec(key)[1])

    def view(self, *args: Any, **kwargs: Any) -> AttrView:
        if args == (None,) and not kwargs:  # PyG's cast reads a bare None as "no attribute": here, group None
            return AttrView(self, TensorAttr(None))
        return super().view(*args, **kwargs)

    def __getitem__(self, key: Any) -> Any:
        return self.view(None) if key is None else super().__getitem__(key)

    # -- writes (the in-memory overlay) ----------------------------------------------------------------
    def _put_tensor(self, tensor: Any, attr: TensorAttr) -> bool:
        what = f"{attr.group_name!r}/{attr.attr_name!r}"
        try:
            group = self._group(attr.group_name, create=True)
        except KeyError as err:
            raise InputError(f"put {what}: {err.args[0]}") from None
        key = (group, self._alias.get((group, attr.attr_name), attr.attr_name))
        tensor = as_written_tensor(tensor, what)
        count = self._put_count(group, tensor, what)
        whole, ids = full_or_rows(tensor, as_rows(attr.index, count, what), count, what)
        if ids is None:
            self._written[key] = Written(whole, count)
            self._hidden.discard(key)
        else:
            self._patch(key, whole, ids, what)
        return True

    def _put_count(self, group: Any, tensor: torch.Tensor, what: str) -> int:
        """Rows of ``group``; for a group no tensor made yet, those of ``tensor``, its first."""
        if group in self.counts or any(g == group for g, _ in self._written):
            return self._count(group)
        if tensor.dim() == 0:
            raise InputError(f"put {what}: a tensor of a new group needs a row dimension, got a scalar")
        return tensor.shape[0]

    def _patch(self, key: Key, rows: torch.Tensor, ids: torch.Tensor, what: str) -> None:
        """Replace rows ``ids`` of the existing tensor ``key`` by ``rows`` (same row shape, promotable dtype)."""
        count = self._count(key[0])
        if key not in self._written and (key not in self.schema or key in self._hidden):
            raise InputError(
                f"put {what}: a new tensor needs all {count} rows of group {key[0]!r}, the index gives {ids.numel()}"
            )
        dtype, row_shape = self._spec(key)
        if tuple(rows.shape[1:]) != row_shape or torch.promote_types(rows.dtype, dtype) != dtype:
            raise InputError(
                f"put {what}: rows of shape {tuple(rows.shape[1:])} and dtype {rows.dtype} cannot "
                f"update a tensor of row shape {row_shape} and dtype {dtype}"
            )
        self._written.setdefault(key, Written(None, count)).patched(ids, rows.to(dtype))

    def update_tensor(self, tensor: Any, *args: Any, **kwargs: Any) -> bool:
        """PyG's ``update_tensor``: the same as :meth:`put_tensor` (rows of an existing tensor are replaced,
        a put of every row replaces it whole)."""
        return self.put_tensor(tensor, *args, **kwargs)

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        try:
            key = self._key(attr)
        except KeyError:
            return False
        self._written.pop(key, None)
        if key in self.schema:
            self._hidden.add(key)
        return True


ReadOnlyFeatureStore = StoredFeatureStore  # its former name


def _hashable(key: Any) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return key is not None

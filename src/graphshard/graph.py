"""The in-memory graph container and its adapters from PyG objects and plain arrays."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import InputError
from .names import SUFFIX_ROOM, check_etype_names, check_path_name
from .sparse import CSRRows

EType = tuple[str, str, str]
DEFAULT_NTYPE = "_N"
DEFAULT_ETYPE: EType = ("_N", "_E", "_N")
Feature = np.ndarray | CSRRows  # a feature's rows: dense, or sparse (bag-of-words, one-hot) kept as CSR


def etype_str(etype: EType) -> str:
    """Canonical edge type as the ``"src:rel:dst"`` string used on disk."""
    return ":".join(etype)


def parse_etype(text: str) -> EType:
    """Parse ``"src:rel:dst"`` into a tuple; raises :class:`InputError` if malformed."""
    parts = text.split(":")
    if len(parts) != 3 or not all(parts):
        raise InputError(f"malformed canonical edge type {text!r}: expected 'src:relation:dst'")
    return parts[0], parts[1], parts[2]


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor (without importing torch when nobody else has)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def to_numpy(value: Any) -> np.ndarray:
    """A tensor or array-like as a NumPy array, without copying CPU tensors or arrays."""
    if is_tensor(value):
        return value.detach().cpu().numpy()
    return np.asarray(value)


@dataclass
class Graph:
    """A (heterogeneous) graph in memory.

    Construction validates everything. A homogeneous graph has the single node type ``"_N"`` and edge
    type ``("_N", "_E", "_N")``.

    Attributes:
        num_nodes: node type → number of nodes; the order of the keys is the node type order.
        edges: canonical edge type ``(src, rel, dst)`` → ``(src_ids, dst_ids)`` per-type int64 arrays.
        node_feats: node type → feature name → array whose first dimension is that type's count.
        edge_feats: canonical edge type → feature name → array whose first dimension is its edge count.

    Raises:
        InputError: a count, type name, edge array or feature is invalid; the message names the type and
            ID at fault.
    """

    num_nodes: dict[str, int]
    edges: dict[EType, tuple[np.ndarray, np.ndarray]]
    node_feats: Mapping[str, Mapping[str, Feature]] = field(default_factory=dict)
    edge_feats: Mapping[EType, Mapping[str, Feature]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.num_nodes = {str(t): _count(t, n) for t, n in self.num_nodes.items()}
        for t in self.num_nodes:
            _check_name(t, "node type")
            check_path_name(t, "node type", extra=SUFFIX_ROOM)
        self.edges = {_etype(k): self._check_edges(_etype(k), v) for k, v in self.edges.items()}
        self.node_feats = {t: self._check_feats(t, f, self.num_nodes, "node") for t, f in self.node_feats.items()}
        counts = {k: len(v[0]) for k, v in self.edges.items()}
        self.edge_feats = {
            _etype(k): self._check_feats(_etype(k), f, counts, "edge") for k, f in self.edge_feats.items()
        }

    # -- properties --------------------------------------------------------------------------
    @property
    def ntypes(self) -> list[str]:
        return list(self.num_nodes)

    @property
    def canonical_etypes(self) -> list[EType]:
        return list(self.edges)

    @property
    def is_homogeneous(self) -> bool:
        return self.ntypes == [DEFAULT_NTYPE] and self.canonical_etypes in ([DEFAULT_ETYPE], [])

    @property
    def total_nodes(self) -> int:
        return int(sum(self.num_nodes.values()))

    @property
    def total_edges(self) -> int:
        return int(sum(len(s) for s, _ in self.edges.values()))

    def num_edges(self, etype: EType) -> int:
        """The number of edges of one edge type.

        Args:
            etype: a canonical edge type ``(src, rel, dst)`` of the graph.

        Returns:
            How many edges of ``etype`` the graph holds.

        Raises:
            KeyError: ``etype`` is not an edge type of the graph.
        """
        return len(self.edges[etype][0])

    # -- constructors ------------------------------------------------------------------------
    @classmethod
    def from_arrays(
        cls,
        src: Any,
        dst: Any,
        num_nodes: int | None = None,
        node_feats: Mapping[str, Any] | None = None,
        *,
        edge_feats: Mapping[str, Any] | None = None,
    ) -> Graph:
        """A homogeneous graph from edge endpoint arrays.

        Args:
            src: source node ID of each edge (a 1-D integer array or tensor).
            dst: destination node ID of each edge, as long as ``src``.
            num_nodes: the number of nodes; default: ``max ID + 1``, or more if a node feature has more
                rows.
            node_feats: feature name → array with one row per node.
            edge_feats: feature name → array with one row per edge.

        Returns:
            The graph, with node type ``"_N"`` and edge type ``("_N", "_E", "_N")``.

        Raises:
            InputError: the IDs are not 1-D integers, ``src`` and ``dst`` differ in length, an ID is out of
                range, or a feature has the wrong number of rows.
        """
        src_a, dst_a = _ids(src, "src", DEFAULT_ETYPE), _ids(dst, "dst", DEFAULT_ETYPE)
        if num_nodes is None:
            num_nodes = int(max(src_a.max(initial=-1), dst_a.max(initial=-1)) + 1)
            for v in (node_feats or {}).values():
                num_nodes = max(num_nodes, len(v))
        return cls(
            {DEFAULT_NTYPE: num_nodes},
            {DEFAULT_ETYPE: (src_a, dst_a)},
            {DEFAULT_NTYPE: dict(node_feats or {})} if node_feats else {},
            {DEFAULT_ETYPE: dict(edge_feats or {})} if edge_feats else {},
        )

    @classmethod
    def from_pyg(cls, data: Any) -> Graph:
        """A graph from a PyG ``torch_geometric.data.Data`` or ``HeteroData``.

        Every node-level tensor attribute (``x``, ``y``, masks, ...) becomes a node feature under its
        own name, every edge-level one (``edge_attr``, ...) an edge feature.

        Args:
            data: the PyG ``Data`` or ``HeteroData`` object.

        Returns:
            The graph, homogeneous for ``Data``.

        Raises:
            InputError: the object's edges or features are invalid (as for the constructor).
        """
        from torch_geometric.data import HeteroData

        if isinstance(data, HeteroData):
            return _from_hetero_data(data)
        return _from_data(data)

    # -- validation --------------------------------------------------------------------------
    def _check_edges(self, etype: EType, pair: Any) -> tuple[np.ndarray, np.ndarray]:
        for t in (etype[0], etype[2]):
            if t not in self.num_nodes:
                raise InputError(f"edge type {etype_str(etype)!r} names unknown node type {t!r}; known: {self.ntypes}")
        _check_name(etype[1], "relation")
        check_etype_names(etype, "edges")
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InputError(f"edges[{etype_str(etype)!r}] must be a (src, dst) pair of ID arrays")
        src, dst = _ids(pair[0], "src", etype), _ids(pair[1], "dst", etype)
        if len(src) != len(dst):
            raise InputError(f"edge type {etype_str(etype)!r}: src has {len(src)} IDs but dst has {len(dst)}")
        _check_ids(src, self.num_nodes[etype[0]], etype, "src")
        _check_ids(dst, self.num_nodes[etype[2]], etype, "dst")
        return src.astype(np.int64, copy=False), dst.astype(np.int64, copy=False)

    @staticmethod
    def _check_feats(key: Any, feats: Mapping[str, Any], counts: Mapping[Any, int], kind: str) -> dict[str, Feature]:
        name = etype_str(key) if isinstance(key, tuple) else key
        if key not in counts:
            raise InputError(f"{kind} features given for unknown {kind} type {name!r}")
        out: dict[str, Feature] = {}
        for fname, value in feats.items():
            _check_name(fname, f"{kind} feature name")
            arr = value if isinstance(value, CSRRows) else to_numpy(value)  # sparse features stay sparse
            if arr.ndim == 0 or arr.shape[0] != counts[key]:
                got = "a scalar" if arr.ndim == 0 else f"{arr.shape[0]} rows"
                raise InputError(f"{kind} feature {name}/{fname}: first dimension must be {counts[key]}, got {got}")
            if arr.dtype == object:
                raise InputError(f"{kind} feature {name}/{fname}: object arrays are not supported")
            out[fname] = arr
        return out


# -- helpers -------------------------------------------------------------------------------
def _etype(key: Any) -> EType:
    if isinstance(key, str):
        return parse_etype(key)
    if not isinstance(key, tuple) or len(key) != 3:
        raise InputError(f"edge type {key!r} must be a (src, relation, dst) tuple")
    return str(key[0]), str(key[1]), str(key[2])


def _count(ntype: Any, n: Any) -> int:
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or int(n) < 0:
        raise InputError(f"number of nodes of type {ntype!r} must be a non-negative integer, got {n!r}")
    return int(n)


def _check_name(name: str, what: str) -> None:
    """Type and feature names become file names (chunked and dataset layouts) and key parts."""
    if not isinstance(name, str) or not name or "/" in name or ":" in name:
        raise InputError(f"{what} {name!r} must be a non-empty string without '/' or ':'")
    check_path_name(name, what)


def _ids(value: Any, end: str, etype: EType) -> np.ndarray:
    arr = to_numpy(value)
    if arr.ndim != 1:
        raise InputError(f"edge type {etype_str(etype)!r}: {end} IDs must be 1-D, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"edge type {etype_str(etype)!r}: {end} IDs must be integers, got dtype {arr.dtype}")
    return arr  # as given: checked (naming a value as given, never as wrapped to int64) before the cast


def _check_ids(ids: np.ndarray, n: int, etype: EType, end: str) -> None:
    if ids.size == 0:
        return
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= n:
        bad = lo if lo < 0 else hi
        pos = int(np.argmax(ids == bad))
        raise InputError(
            f"edge type {etype_str(etype)!r}: {end} ID {bad} at position {pos} is out of range "
            f"[0, {n}) for node type {etype[0] if end == 'src' else etype[2]!r}"
        )


def _from_data(data: Any) -> Graph:
    n = int(data.num_nodes)
    ei = data.edge_index
    e = ei.shape[1] if ei is not None else 0
    src, dst = (ei[0], ei[1]) if ei is not None else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    nf, ef = {}, {}
    for key, value in data.items():
        if key == "edge_index" or not is_tensor(value) or value.dim() == 0:
            continue
        if data.is_node_attr(key) and value.shape[0] == n:
            nf[key] = value
        elif data.is_edge_attr(key) and value.shape[0] == e:
            ef[key] = value
    return Graph.from_arrays(src, dst, num_nodes=n, node_feats=nf, edge_feats=ef)


def _from_hetero_data(data: Any) -> Graph:
    num_nodes = {t: int(data[t].num_nodes or 0) for t in data.node_types}
    edges, node_feats, edge_feats = {}, {}, {}
    for t in data.node_types:
        store = data[t]
        feats = {k: v for k, v in store.items() if is_tensor(v) and v.dim() > 0 and v.shape[0] == num_nodes[t]}
        if feats:
            node_feats[t] = feats
    for et in data.edge_types:
        store = data[et]
        ei = store.edge_index
        edges[et] = (ei[0], ei[1])
        e = ei.shape[1]
        feats = {
            k: v for k, v in store.items() if k != "edge_index" and is_tensor(v) and v.dim() > 0 and v.shape[0] == e
        }
        if feats:
            edge_feats[et] = feats
    return Graph(num_nodes, edges, node_feats, edge_feats)


def with_reverse_edges(g: Graph) -> Graph:
    """``g`` plus, for every edge type ``(s, r, d)`` with ``s != d`` whose reverse is not there yet, a
    type ``(d, "rev_" + r, s)`` with every edge flipped, so that messages flow both ways when sampling
    in-edges (how undirected heterogeneous relations such as paper–author are trained on). Edge
    features are not copied to the reversed types."""
    edges = dict(g.edges)
    pairs = {(et[0], et[2]) for et in edges}
    for (s, r, d), (src, dst) in g.edges.items():
        if s != d and (d, s) not in pairs:
            edges[(d, f"rev_{r}", s)] = (dst, src)
    return Graph(dict(g.num_nodes), edges, g.node_feats, g.edge_feats)

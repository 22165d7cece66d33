"""Structural validation of a loaded partition, run on every load: cheap (vectorised, O(size)), so a
corrupt or inconsistent file is an error naming it, never a wrong answer or a crash downstream.

What is checked against the config JSON (the partition book) and the format's rules:
- dtypes: ID tensors int32 or int64, ``part_id``/``_TYPE`` int8, int16, int32 or int64 (see :mod:`.dtypes`),
  ``inner_node``/``inner_edge`` bool;
- CSC: ``indptr`` starts at 0, never decreases, ends at ``len(indices)``; ``indices`` within the local nodes;
- nodes: inner nodes are the local prefix with this partition's new IDs; HALO IDs lie in other
  partitions, in increasing order (so none repeats); ``part_id`` and ``_TYPE`` agree with the ranges
  of ``node_map`` for every ``_ID``;
- edges: exactly the in-edges of inner nodes are ``inner_edge`` and there are as many as ``edge_map``
  gives this partition (every inner node's in-edges are stored: the 1-hop structure); inner edge
  ``_ID``s are exactly this partition's range, each once; HALO edge ``_ID``s lie outside it;
  ``_TYPE`` agrees with ``edge_map``, and each edge's endpoints have the node types of its edge type;
- HALO depth (``halo_hops = k``), by a k-pass breadth-first search backwards from the inner nodes over
  the stored edges: only nodes within k - 1 hops have stored in-edges (so with k = 1 none of the HALO
  nodes), and every HALO node is within k hops (each is an endpoint of a stored edge). Not checked:
  that a node within k - 1 hops has *all* its in-edges stored (a 1-hop partition under a config
  claiming 2 hops passes): that needs the in-degrees held by the other partitions.

Not checked here: ``orig_id`` values (checked to form a permutation when original IDs are asked
for, see ``load._original_ids``); feature values and labels (training checks them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..errors import FormatError
from ..graph import parse_etype
from .config import PartitionConfig
from .dtypes import ID_DTYPES, ID_KEYS, SMALL_DTYPES

INT_KEYS = (
    "indptr",
    "indices",
    "node/_ID",
    "node/orig_id",
    "node/part_id",
    "node/_TYPE",
    "edge/_ID",
    "edge/orig_id",
    "edge/_TYPE",
)
BOOL_KEYS = ("node/inner_node", "edge/inner_edge")


class _Ranges:
    """The (partition, type) ranges of one ID space, flattened in ID order for vectorised look-ups."""

    def __init__(self, ranges: dict[str, np.ndarray], num_parts: int):
        types = list(ranges)
        starts = np.array([[ranges[t][p, 0] for t in types] for p in range(num_parts)], dtype=np.int64).reshape(-1)
        self.starts = torch.from_numpy(starts)
        self.type_of = torch.arange(len(types)).repeat(num_parts)
        self.part_of = torch.arange(num_parts).repeat_interleave(len(types))
        self.total = int(ranges[types[-1]][-1, 1]) if types else 0

    def locate(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(partition, type ID) owning each ID (IDs must already be in ``[0, total)``)."""
        idx = torch.searchsorted(self.starts, ids.long(), right=True) - 1
        return self.part_of[idx], self.type_of[idx]


BLOCK = 1 << 22  # per-edge checks run over blocks of this many edges: their temporaries stay bounded


def _blocks(n: int) -> range:
    return range(0, n, BLOCK)


def _fail(path: Path, what: str, bad: torch.Tensor, values: torch.Tensor | None = None, *, offset: int = 0) -> None:
    pos = torch.nonzero(bad)
    if pos.numel():
        i = int(pos[0, 0])
        shown = f" (value {int(values[i])})" if values is not None else ""
        raise FormatError(f"{path}: {what}: first at position {offset + i}{shown}")


def check_dtypes(t: dict[str, torch.Tensor], path: Path) -> None:
    """Raise :class:`FormatError` naming ``path`` and the tensor if a structure tensor has a dtype the format
    does not allow (IDs int32 or int64, part and type IDs any signed integer type, the flags bool)."""
    for key in INT_KEYS + BOOL_KEYS:
        got = t[key].dtype
        if key in BOOL_KEYS:
            allowed = [torch.bool]
        else:
            allowed = [_TORCH_INT[d] for d in (ID_DTYPES if key in ID_KEYS else SMALL_DTYPES)]
        if got not in allowed:
            raise FormatError(
                f"{path}: tensor {key!r} has dtype {got}, expected " + " or ".join(str(a) for a in allowed)
            )


_TORCH_INT = {np.dtype(np.int8): torch.int8, np.dtype(np.int16): torch.int16}
_TORCH_INT.update({np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64})


def check_structure(cfg: PartitionConfig, part_id: int, t: dict[str, torch.Tensor], path: Path) -> None:
    """Raise :class:`FormatError` naming ``path`` if partition ``part_id``'s structure breaks a rule above.
    Edge-sized tensors may be compact (int32 IDs, int8 types): they are widened a block at a time only."""
    check_dtypes(t, path)
    indptr, indices = t["indptr"], t["indices"]
    n, e = indptr.shape[0] - 1, indices.shape[0]
    _fail(path, "'indptr' decreases", indptr.diff() < 0)
    for b in _blocks(e):
        part = indices[b : b + BLOCK]
        _fail(path, f"'indices' holds a local node ID outside [0, {n})", (part < 0) | (part >= n), part, offset=b)
    nodes, edges = _Ranges(cfg.node_map, cfg.num_parts), _Ranges(cfg.edge_map, cfg.num_parts)
    n_inner = _check_nodes(cfg, part_id, t, path, nodes=nodes)
    _check_edges(cfg, part_id, t, path, edges=edges, n_inner=n_inner)
    _check_halo_depth(cfg.halo_hops, t, path, n_inner)


def _check_halo_depth(k: int, t: dict[str, torch.Tensor], path: Path, n_inner: int) -> None:
    """Breadth-first backwards from the inner nodes over the stored edges (k passes over ``indices``):
    only nodes within k - 1 hops have stored in-edges, and every HALO node is within k hops."""
    indptr, indices, ids = t["indptr"], t["indices"], t["node/_ID"]
    n, degree = indptr.shape[0] - 1, indptr.diff()
    reached = torch.zeros(n, dtype=torch.bool)
    reached[:n_inner] = True
    frontier = reached.clone()
    for hop in range(1, k + 1):
        if hop == k:
            beyond = (degree > 0) & ~reached
            _fail(
                path,
                f"stores in-edges of a HALO node more than halo_hops - 1 = {k - 1} hops from the inner "
                f"nodes, but the config says halo_hops = {k}; node/_ID",
                beyond,
                ids,
            )
        frontier = _sources_of(frontier, indptr, indices, int(indptr[n_inner]) if hop == 1 else None)
        frontier &= ~reached
        reached |= frontier
    _fail(
        path,
        f"HALO node is not within halo_hops = {k} hops of the inner nodes along the stored edges; node/_ID",
        ~reached,
        ids,
    )


def _sources_of(
    nodes: torch.Tensor, indptr: torch.Tensor, indices: torch.Tensor, prefix: int | None = None
) -> torch.Tensor:
    """Which nodes are the source of an in-edge of ``nodes`` (a bool mask; ``prefix``: of the first ``prefix``
    edges instead, the in-edges of the inner nodes), a block of edges at a time: indices stored compact are
    widened per block, never whole."""
    out = torch.zeros(nodes.shape[0], dtype=torch.bool)
    for b in _blocks(indices.shape[0] if prefix is None else prefix):
        end = min(b + BLOCK, indices.shape[0] if prefix is None else prefix)
        src = indices[b:end]
        if prefix is None:  # CSC: an edge's destination is the node whose run of in-edges holds it
            src = src[nodes[torch.searchsorted(indptr, torch.arange(b, end), right=True) - 1]]
        out[src.long()] = True
    return out


def _check_nodes(cfg: PartitionConfig, part_id: int, t: dict[str, torch.Tensor], path: Path, *, nodes: _Ranges) -> int:
    ids = t["node/_ID"]
    lo, hi = (
        (
            int(x)
            for x in (
                cfg.node_map[next(iter(cfg.node_map))][part_id, 0],
                cfg.node_map[list(cfg.node_map)[-1]][part_id, 1],
            )
        )
        if cfg.node_map
        else (0, 0)
    )
    n_inner = hi - lo
    _fail(path, f"node/_ID outside [0, {cfg.num_nodes})", (ids < 0) | (ids >= cfg.num_nodes), ids)
    halo = ids[n_inner:]
    _fail(path, f"HALO node/_ID inside this partition's own range [{lo}, {hi})", (halo >= lo) & (halo < hi), halo)
    unordered = torch.nonzero(halo.diff() <= 0)
    if unordered.numel():
        i = int(unordered[0, 0])
        raise FormatError(
            f"{path}: HALO node/_ID not in increasing order (or repeated): local position "
            f"{n_inner + i + 1} holds {int(halo[i + 1])} after {int(halo[i])}"
        )
    part, ntype = nodes.locate(ids)
    _fail(
        path,
        "node/part_id differs from the owner of node/_ID in the config's node_map",
        t["node/part_id"] != part,
        t["node/part_id"],
    )
    _fail(
        path,
        "node/_TYPE differs from the type of node/_ID in the config's node_map",
        t["node/_TYPE"] != ntype,
        t["node/_TYPE"],
    )
    return n_inner


def _check_edges(
    cfg: PartitionConfig, part_id: int, t: dict[str, torch.Tensor], path: Path, *, edges: _Ranges, n_inner: int
) -> None:
    indptr, eids, inner = t["indptr"], t["edge/_ID"], t["edge/inner_edge"]
    n_own = int(indptr[n_inner])  # CSC by destination: the in-edges of inner nodes come first
    first, last = next(iter(cfg.edge_map), None), list(cfg.edge_map)[-1] if cfg.edge_map else None
    elo = int(cfg.edge_map[first][part_id, 0]) if first else 0
    ehi = int(cfg.edge_map[last][part_id, 1]) if last else 0
    if n_own != ehi - elo:
        raise FormatError(
            f"{path}: holds {n_own} in-edges of inner nodes, but the config's edge_map gives this "
            f"partition {ehi - elo} edges (missing or extra 1-hop structure)"
        )
    for b in _blocks(inner.shape[0]):
        block = inner[b : b + BLOCK]
        cut = max(0, min(n_own - b, block.shape[0]))  # where the block's HALO edges start
        _fail(path, "edge/inner_edge is false for an in-edge of an inner node", ~block[:cut], None, offset=b)
        _fail(path, "edge/inner_edge is true for an in-edge of a HALO node", block[cut:], None, offset=b + cut)
    seen = torch.zeros(n_own, dtype=torch.bool)
    for b in _blocks(eids.shape[0]):
        ids = eids[b : b + BLOCK].long()  # compared with counts that need not fit the stored type
        own, halo = ids[: max(n_own - b, 0)], ids[max(n_own - b, 0) :]
        _fail(
            path,
            f"inner edge/_ID outside this partition's range [{elo}, {ehi})",
            (own < elo) | (own >= ehi),
            own,
            offset=b,
        )
        seen[own - elo] = True  # in range (checked above): each of the partition's edge IDs must appear once
        _fail(
            path,
            f"HALO edge/_ID outside [0, {cfg.num_edges}) or inside this partition's range",
            (halo < 0) | (halo >= cfg.num_edges) | ((halo >= elo) & (halo < ehi)),
            halo,
            offset=max(n_own, b),
        )
    if not bool(seen.all()):
        missing = elo + int(torch.nonzero(~seen)[0, 0])
        raise FormatError(
            f"{path}: inner edge/_ID {missing} is missing (another ID of this partition's range [{elo}, {ehi}) repeats)"
        )
    if len(cfg.etypes) == 1:  # one edge type (and endpoints of its node types, checked per node): no look-up
        for b in _blocks(eids.shape[0]):
            given = t["edge/_TYPE"][b : b + BLOCK]
            _fail(path, "edge/_TYPE is not 0, the only edge type", given != 0, given, offset=b)
        if len(cfg.ntypes) == 1:
            return
    else:
        for b in _blocks(eids.shape[0]):
            _, etype = edges.locate(eids[b : b + BLOCK])
            given = t["edge/_TYPE"][b : b + BLOCK]
            _fail(
                path,
                "edge/_TYPE differs from the type of edge/_ID in the config's edge_map",
                given != etype,
                given,
                offset=b,
            )
    _check_endpoint_types(cfg, t, path)


def _check_endpoint_types(cfg: PartitionConfig, t: dict[str, torch.Tensor], path: Path) -> None:
    ntypes = list(cfg.ntypes)
    ends = torch.tensor(
        [[ntypes.index(parse_etype(e)[0]), ntypes.index(parse_etype(e)[2])] for e in cfg.etypes], dtype=torch.int64
    ).reshape(-1, 2)
    if ends.shape[0] == 0 or t["indices"].shape[0] == 0:
        return
    etype, node_type, indptr, indices = t["edge/_TYPE"], t["node/_TYPE"], t["indptr"], t["indices"]
    for b in _blocks(indices.shape[0]):
        et = etype[b : b + BLOCK].long()  # int8 type IDs cannot index
        _fail(
            path,
            "an edge's source node has another type than its edge type's source",
            node_type[indices[b : b + BLOCK].long()] != ends[et, 0],
            None,
            offset=b,
        )
        if len(ntypes) > 1:  # CSC: an edge's destination is the node whose run of in-edges holds it
            dst = torch.searchsorted(indptr, torch.arange(b, b + et.shape[0]), right=True) - 1
            _fail(
                path,
                "an edge's destination node has another type than its edge type's destination",
                node_type[dst] != ends[et, 1],
                None,
                offset=b,
            )

"""Loading partitions: structure and features memory-mapped, with validation and checksums."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from ..book import RangePartitionBook
from ..errors import FormatError
from ..graph import EType, parse_etype
from ..sparse import CSRRows
from .config import PartitionConfig, as_config
from .dtypes import WIDE_KEYS
from .sparse import assemble, logical_schema, sparse_widths
from .tensorfile import header_schema, read_header, read_tensors, sha256_file
from .validate import check_dtypes, check_structure

NODE_KEYS = ("node/_ID", "node/inner_node", "node/orig_id", "node/part_id", "node/_TYPE")
EDGE_KEYS = ("edge/_ID", "edge/inner_edge", "edge/orig_id", "edge/_TYPE")


@dataclass(frozen=True)
class PartitionGraph:
    """One partition's local graph: CSC in-adjacency over local IDs plus node/edge data.

    ``indptr`` and ``ndata["_ID"]`` are int64; the other integer tensors are as the file stores them
    (``indices`` and edge IDs int32 or int64, type and part IDs possibly int8: see `graphshard.format.dtypes`),
    memory-mapped. Local IDs ``[0, num_inner_nodes)`` are inner nodes in new-ID order, then HALO nodes.

    Attributes:
        indptr: CSC pointers, one more than the partition's local nodes (int64): the in-edges of local
            node ``v`` are entries ``indptr[v] ... indptr[v + 1] - 1``.
        indices: local source ID of each edge, in destination order.
        ndata: node data by local ID, keyed without the ``node/`` prefix (``_ID``, ``inner_node``, ...).
        edata: edge data in ``indices`` order, keyed without the ``edge/`` prefix (``_ID``,
            ``inner_edge``, ...).
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    ndata: dict[str, torch.Tensor]
    edata: dict[str, torch.Tensor]

    @property
    def num_nodes(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def num_edges(self) -> int:
        return int(self.indices.shape[0])

    @property
    def num_inner_nodes(self) -> int:
        return int(self.ndata["inner_node"].sum())

    @property
    def num_inner_edges(self) -> int:
        return int(self.edata["inner_edge"].sum())

    def dst_local(self) -> torch.Tensor:
        """Local destination ID of each edge (aligned with ``indices``)."""
        return torch.repeat_interleave(torch.arange(self.num_nodes), self.indptr.diff())


class Partition(NamedTuple):
    """One loaded partition, as `load_partition` returns it.

    Attributes:
        graph: the partition's local graph (structure and node/edge data).
        node_feats: node features of the partition's inner nodes, keyed ``"<type>/<name>"`` (a sparse
            feature is one ``CSRRows``); empty when loaded without features.
        edge_feats: edge features of the partition's inner edges, keyed ``"<type>/<name>"``.
        partition_book: the partition book of the whole graph, for this partition.
        graph_name: the graph's name (its config is ``<graph_name>.json``).
        ntypes: the node types, in the type order.
        etypes: the canonical edge types ``(src, rel, dst)``, in the type order.
    """

    graph: PartitionGraph
    node_feats: dict[str, torch.Tensor | CSRRows]  # a sparse feature is one CSRRows
    edge_feats: dict[str, torch.Tensor]
    partition_book: RangePartitionBook
    graph_name: str
    ntypes: list[str]
    etypes: list[EType]


def load_partition(
    part_config: str | os.PathLike | PartitionConfig, part_id: int, load_feats: bool = True, verify: bool = False
) -> Partition:
    """Load partition ``part_id`` of a partitioned graph.

    Tensors are memory-mapped, not copied.

    Args:
        part_config: the path of the partition config (the ``<graph_name>.json``), or the config already
            loaded.
        part_id: the partition to load.
        load_feats: also load the partition's node and edge features; False leaves them empty.
        verify: check the sha256 of every file read against the config's checksums.

    Returns:
        The partition: its local graph, features, the partition book, and the graph's name and types.

    Raises:
        FormatError: the config or a partition file is missing, corrupt or inconsistent, or ``part_id``
            does not exist; names the file and what is wrong.
    """
    cfg = as_config(part_config)
    book = book_from_config(cfg, part_id)
    graph = _read_graph(cfg, part_id, verify)
    node_feats, edge_feats = load_partition_feats(cfg, part_id, verify) if load_feats else ({}, {})
    return Partition(
        graph, node_feats, edge_feats, book, cfg.graph_name, list(cfg.ntypes), [parse_etype(e) for e in cfg.etypes]
    )


def load_partition_feats(
    part_config: str | os.PathLike | PartitionConfig, part_id: int, verify: bool = False
) -> tuple[dict[str, torch.Tensor | CSRRows], dict[str, torch.Tensor]]:
    """Node and edge features of partition ``part_id``'s inner items, keyed ``"<type>/<name>"``.

    Args:
        part_config: the path of the partition config (the ``<graph_name>.json``), or the config already
            loaded.
        part_id: the partition whose features to load.
        verify: check the sha256 of the feature files against the config's checksums.

    Returns:
        ``(node features, edge features)``, memory-mapped; a sparse node feature is one ``CSRRows``.

    Raises:
        FormatError: the config or a feature file is missing, corrupt or inconsistent with the config,
            or ``part_id`` does not exist; names the file and what is wrong.
    """
    cfg = as_config(part_config)
    _check_part(cfg, part_id)
    node = assemble(
        _read(cfg, part_id, "node_feats", verify),
        sparse_widths(cfg, "node_feats"),
        cfg.part_path(part_id, "node_feats"),
    )
    edge = _read(cfg, part_id, "edge_feats", verify)
    _check_feature_rows(cfg, part_id, node, cfg.node_map, key="node_feats")
    _check_feature_rows(cfg, part_id, edge, cfg.edge_map, key="edge_feats")
    _check_feature_schema(cfg, part_id, "node_feats")
    _check_feature_schema(cfg, part_id, "edge_feats")
    return node, edge


def load_partition_book(
    part_config: str | os.PathLike | PartitionConfig, part_id: int | None = None
) -> RangePartitionBook:
    """The partition book of a partitioned graph.

    Reads only the config until original IDs are asked for.

    Args:
        part_config: the path of the partition config (the ``<graph_name>.json``), or the config already
            loaded.
        part_id: the partition this process holds (the book's ``partid``), if any.

    Returns:
        The partition book; it reads the original ID files when asked for original IDs.

    Raises:
        FormatError: the config is missing or invalid, or ``part_id`` does not exist.
    """
    return book_from_config(as_config(part_config), part_id)


def book_from_config(cfg: PartitionConfig, part_id: int | None = None) -> RangePartitionBook:
    if part_id is not None:
        _check_part(cfg, part_id)
    return RangePartitionBook(
        cfg.num_parts,
        list(cfg.ntypes),
        list(cfg.etypes),
        cfg.node_map,
        edge_map=cfg.edge_map,
        part_id=part_id,
        original_loader=lambda kind, name: original_ids(cfg, kind, name),
    )


def verify_checksums(part_config: str | os.PathLike | PartitionConfig) -> None:
    """Check every file listed in the config against its recorded sha256; raises :class:`FormatError`."""
    cfg = as_config(part_config)
    for rel in cfg.checksums:
        _verify_file(cfg, rel)


def verify_partition(cfg: PartitionConfig, part_id: int) -> int:
    """Check every file of partition ``part_id`` that has a recorded checksum against it; returns the bytes
    hashed. Raises :class:`FormatError` naming the first file that is missing or does not match."""
    _check_part(cfg, part_id)
    hashed = 0
    for rel in cfg.parts[part_id].values():
        if rel in cfg.checksums:
            _verify_file(cfg, rel)
            hashed += (cfg.root / rel).stat().st_size
    return hashed


# -- internals ---------------------------------------------------------------------------------
def _check_part(cfg: PartitionConfig, part_id: int) -> None:
    if not 0 <= part_id < cfg.num_parts:
        raise FormatError(f"{cfg.path}: partition {part_id} does not exist (num_parts = {cfg.num_parts})")


def _verify_file(cfg: PartitionConfig, rel: str) -> None:
    path = cfg.root / rel
    if rel not in cfg.checksums:
        raise FormatError(f"{cfg.path}: no checksum recorded for {rel}")
    if not path.is_file():
        raise FormatError(f"{path}: file is missing")
    if sha256_file(path) != cfg.checksums[rel]:
        raise FormatError(
            f"{path}: sha256 does not match the checksum recorded in {cfg.path.name} (corrupt or modified)"
        )


def _read(cfg: PartitionConfig, part_id: int, key: str, verify: bool) -> dict[str, torch.Tensor]:
    rel = cfg.parts[part_id][key]
    if verify:
        _verify_file(cfg, rel)
    return read_tensors(cfg.root / rel, _expect(cfg, part_id, key))


def _expect(cfg: PartitionConfig, part_id: int, key: str) -> dict[str, str]:
    """The identity a file must carry: the config's graph, this partition, the file's kind and run."""
    return cfg.identity(part_id, key)


def _read_graph(cfg: PartitionConfig, part_id: int, verify: bool) -> PartitionGraph:
    t = _read(cfg, part_id, "part_graph", verify)
    path = cfg.part_path(part_id, "part_graph")
    for key in ("indptr", "indices", *NODE_KEYS, *EDGE_KEYS):
        if key not in t:
            raise FormatError(f"{path}: missing tensor {key!r}")
    n, e = t["indptr"].shape[0] - 1, t["indices"].shape[0]
    if n < 0 or int(t["indptr"][-1]) != e or int(t["indptr"][0]) != 0:
        raise FormatError(f"{path}: 'indptr' does not describe the {e} entries of 'indices'")
    for key in NODE_KEYS + EDGE_KEYS:
        want = n if key.startswith("node/") else e
        if t[key].shape != (want,):
            raise FormatError(f"{path}: tensor {key!r} has shape {tuple(t[key].shape)}, expected ({want},)")
    check_dtypes(t, path)
    t = widen_nodes(t)
    lo, hi = _part_range(cfg.node_map, part_id)
    n_inner = hi - lo
    ids = t["node/_ID"][:n_inner].numpy()
    if (
        n_inner > n
        or not np.array_equal(ids, np.arange(lo, hi))
        or bool(t["node/inner_node"][n_inner:].any())
        or not bool(t["node/inner_node"][:n_inner].all())
    ):
        raise FormatError(
            f"{path}: inner nodes must be the local prefix with new IDs [{lo}, {hi}) as in {cfg.path.name}"
        )
    check_structure(cfg, part_id, t, path)
    return PartitionGraph(t["indptr"], t["indices"], {k[5:]: t[k] for k in NODE_KEYS}, {k[5:]: t[k] for k in EDGE_KEYS})


def widen_nodes(t: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``t`` with ``indptr`` and ``node/_ID`` as int64, whatever compact type the file stores them in: they are
    per-node (small), and consumers do offset arithmetic on them (edge positions, global IDs) that must not
    overflow. Everything else stays as stored, memory-mapped: ``indices`` and ``edge/...`` may be int32,
    ``_TYPE`` and ``part_id`` int8 (see :mod:`.dtypes`)."""
    out = dict(t)
    for key in WIDE_KEYS:
        out[key] = out[key].long()  # the tensor itself when it already is int64
    return out


def _part_range(ranges: dict[str, np.ndarray], part_id: int) -> tuple[int, int]:
    arrs = list(ranges.values())
    if not arrs:
        return 0, 0
    return int(arrs[0][part_id, 0]), int(arrs[-1][part_id, 1])


def _check_feature_rows(
    cfg: PartitionConfig, part_id: int, feats: dict[str, torch.Tensor], ranges: dict[str, np.ndarray], *, key: str
) -> None:
    path = cfg.part_path(part_id, key)
    for name, tensor in feats.items():
        type_name = name.rsplit("/", 1)[0]
        if "/" not in name or type_name not in ranges:
            raise FormatError(f"{path}: feature key {name!r} does not start with a known type")
        start, end = ranges[type_name][part_id]
        if tensor.dim() == 0 or tensor.shape[0] != end - start:
            raise FormatError(
                f"{path}: feature {name!r} has {tensor.shape[0] if tensor.dim() else 0} rows, "
                f"expected {end - start} (inner items of that type)"
            )


def _schema(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Feature name -> (dtype code, row shape), from a file's header only."""
    return header_schema(read_header(path))


def _check_feature_schema(cfg: PartitionConfig, part_id: int, key: str) -> None:
    """This partition's features are those the config declares, and every other partition holds the same
    features with the same dtypes and row shapes (headers only, no data read)."""
    mine_path = cfg.part_path(part_id, key)
    widths = sparse_widths(cfg, key) if key == "node_feats" else {}
    mine = logical_schema(_schema(mine_path), widths)
    _differ(mine_path, mine, cfg.path, cfg.feature_schema[key], other_name="its config's feature_schema")
    for p in range(cfg.num_parts):
        other_path = cfg.part_path(p, key)
        if p != part_id and other_path.is_file():
            _differ(
                mine_path, mine, other_path, logical_schema(_schema(other_path), widths), other_name=str(other_path)
            )


def _differ(path: Path, mine: dict, other_path: Path, other: dict, *, other_name: str) -> None:
    if other == mine:
        return
    diff = sorted(set(mine.items()) ^ set(other.items()))[0][0]
    raise FormatError(
        f"{path} and {other_path} disagree on feature {diff!r} ({_spec(mine.get(diff))} here, "
        f"{_spec(other.get(diff))} in {other_name}); every partition must hold the same features "
        "with the same dtype and row shape"
    )


def _spec(spec: tuple[str, tuple[int, ...]] | None) -> str:
    return "absent" if spec is None else f"{spec[0]} rows of shape {spec[1]}"


def original_source(cfg: PartitionConfig, kind: str, part_id: int) -> Path:
    """The file partition ``part_id``'s original ``kind`` (node/edge) IDs are read from."""
    extra = cfg.parts[part_id].get("orig_nids" if kind == "node" else "orig_eids")
    return cfg.root / extra if extra else cfg.part_path(part_id, "part_graph")


def original_piece(cfg: PartitionConfig, kind: str, type_name: str, part_id: int) -> np.ndarray:
    """Original per-type IDs of the items of one type that partition ``part_id`` owns, in new-ID order."""
    ranges = cfg.node_map if kind == "node" else cfg.edge_map
    key = "orig_nids" if kind == "node" else "orig_eids"
    lo, hi = (int(x) for x in ranges[type_name][part_id])
    extra = cfg.parts[part_id].get(key)
    if extra:
        return _orig_file_ids(
            cfg.root / extra, read_tensors(cfg.root / extra, _expect(cfg, part_id, key)), type_name, hi - lo
        )
    g = _read_graph(cfg, part_id, False)
    if kind == "node":
        base = _part_range(cfg.node_map, part_id)[0]
        return g.ndata["orig_id"][lo - base : hi - base].numpy().astype(np.int64)
    return _inner_edge_orig_ids({f"edge/{k}": v for k, v in g.edata.items()}, lo, hi)


def original_ids(
    cfg: PartitionConfig, kind: str, type_name: str, piece: Callable[[int], np.ndarray] | None = None
) -> np.ndarray:
    """Original per-type IDs of every item of one type, in per-type new-ID order: a permutation of
    ``[0, count)`` (checked, since lookups index with them). ``piece(p)``: partition ``p``'s part (default:
    :func:`original_piece`, read here; a distributed run asks a partition's server for the pieces of
    partitions its host does not hold)."""
    piece = piece or (lambda p: original_piece(cfg, kind, type_name, p))
    pieces = [np.asarray(piece(p)) for p in range(cfg.num_parts)]
    table = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
    seen = np.zeros(table.shape[0], dtype=bool)
    inside = (table >= 0) & (table < table.shape[0])
    seen[table[inside]] = True
    if not inside.all() or not seen.all():
        i = int(np.flatnonzero(~inside)[0]) if not inside.all() else None
        what = (
            f"per-type new ID {i} has original ID {int(table[i])}, outside [0, {table.shape[0]})"
            if i is not None
            else f"original ID {int(np.flatnonzero(~seen)[0])} is missing (another one repeats)"
        )
        raise FormatError(
            f"{cfg.path}: the original {kind} IDs of type {type_name!r} stored with its partitions are "
            f"not a permutation: {what}"
        )
    return table


def _orig_file_ids(path: Path, tensors: dict[str, torch.Tensor], type_name: str, count: int) -> np.ndarray:
    arr = tensors.get(type_name)
    if arr is None or arr.dtype != torch.int64 or tuple(arr.shape) != (count,):
        got = "nothing" if arr is None else f"{arr.dtype} of shape {tuple(arr.shape)}"
        raise FormatError(
            f"{path}: tensor {type_name!r} must hold the {count} original IDs (int64) of this "
            f"partition's items of that type, got {got}"
        )
    return arr.numpy()


def _inner_edge_orig_ids(t: dict[str, torch.Tensor], lo: int, hi: int) -> np.ndarray:
    ids = t["edge/_ID"].numpy()
    sel = (ids >= lo) & (ids < hi) & t["edge/inner_edge"].numpy()
    out = np.empty(hi - lo, dtype=np.int64)
    out[ids[sel].astype(np.int64) - lo] = t["edge/orig_id"].numpy()[sel]
    return out

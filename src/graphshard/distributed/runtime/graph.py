"""``DistGraph``: the whole partitioned graph as seen from one process — sizes and types, feature rows of
any node or edge, degrees of any node, the partition book. Backed by this process's partition
(memory-mapped) and the other processes' partitions over RPC."""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

import numpy as np
import torch

from ...errors import InputError
from ...format.config import PartitionConfig, as_config
from ...format.load import PartitionGraph, original_ids, original_piece, original_source
from ...graph import EType, parse_etype
from ...ids import as_id_array
from ...sampling.degrees import DegreeTable, in_degree_table, source_counts
from ..groups.rpc import RpcGroup, by_owner, current_group, register, registered, rpc_call
from ..remote.colocated import load_colocated
from ..remote.feature import DistFeatureStore
from ..remote.services import start_serving
from ..remote.tensor import DistTensor
from ..stores.partitions import load_served, missing_files, verify_served
from ..transport.channel import handler
from ..transport.network import own_address

_DEGREES = "degrees"
_ORIGINALS = "originals"  # the partition config, for the original-ID requests of other hosts
_INSTANCES = itertools.count()


@handler
def _add_out(key: str, gids: torch.Tensor, etype: torch.Tensor, counts: torch.Tensor) -> None:
    registered(f"{_DEGREES}/{key}").add_out(gids.numpy(), etype.numpy(), counts.numpy())


@handler
def _degrees(key: str, kind: str, gids: torch.Tensor, etype: int | None) -> torch.Tensor:
    return torch.from_numpy(registered(f"{_DEGREES}/{key}").get(kind, gids.numpy(), etype))


class FeatureView:
    """Rows of one feature of one node or edge type: ``view[ids]`` (global per-type IDs)."""

    def __init__(self, store: DistFeatureStore, group: Any, name: str):
        self.store, self.group, self.name = store, group, name
        self.shape = store.get_tensor_size(group, name)  # of the whole graph

    def __getitem__(self, ids: Any) -> torch.Tensor:
        return self.store.lookup(self.group, self.name, ids)


class DataView:
    """``name → rows`` of one node or edge type: partition features and any DistTensors assigned."""

    def __init__(self, store: DistFeatureStore, group: Any):
        self.store, self.group = store, group
        self.extra: dict[str, DistTensor] = {}

    def keys(self) -> list[str]:
        names = self.store.attr_names(self.group)
        return names + [k for k in self.extra if k not in names]

    def __contains__(self, name: str) -> bool:
        return name in self.keys()

    def __getitem__(self, name: str) -> FeatureView | DistTensor:
        if name in self.extra:
            return self.extra[name]
        if not self.store.has(self.group, name):
            raise KeyError(f"{self.group!r} has no data {name!r}; it has {self.keys()}")
        return FeatureView(self.store, self.group, name)

    def __setitem__(self, name: str, tensor: DistTensor) -> None:
        if not isinstance(tensor, DistTensor):
            raise InputError(f"assign a DistTensor to {self.group!r}/{name!r}, not {type(tensor).__name__}")
        self.extra[name] = tensor


class _TypeAccess:
    def __init__(self, views: dict[Any, DataView], key: Any):
        self.data = views[key]


def _check_partition_files(cfg: Any, group: RpcGroup, verify: bool) -> None:
    """Every member checks that its host holds the files of the partitions it serves and (``verify``) that
    they match the config's checksums, and every member learns the result (collective): a missing or corrupt
    partition file stops the run on every host before its data is trusted, with one line naming the host,
    the partition and the file. Members given different graphs (another config) are told so first."""
    lost = missing_files(cfg, group.world_size, group.lanes, group.rank)
    corrupt = None if lost or not verify else verify_served(cfg, group.world_size, group.lanes, group.rank)
    graph = [cfg.graph_name, cfg.num_nodes, cfg.num_edges, cfg.num_parts, str(cfg.path)]
    host = own_address(os.environ.get("MASTER_ADDR", "127.0.0.1"))
    mine = json.dumps({"host": host, "missing": lost[:1], "corrupt": corrupt, "graph": graph})
    everyone = [json.loads(raw) for raw in group.all_gather(mine.encode(), "partition files checked")]
    _check_same_graph(everyone, group.names)
    for member, seen in enumerate(everyone):
        where = f"host {seen['host']} ({group.names[member]})"
        if seen["missing"]:
            part, path = seen["missing"][0]
            raise InputError(
                f"{where} lacks partition {part}, which it must serve: {path} is missing (copy that "
                "partition's directory beside the config on that host)"
            )
        if seen["corrupt"]:
            raise InputError(
                f"{where}: {seen['corrupt']}; copy the file again or re-partition (--no-verify skips this check)"
            )


def _check_same_graph(everyone: list[dict[str, Any]], names: list[str]) -> None:
    """Every member must open the same partitioned graph: otherwise one line naming two members, their hosts
    and the graphs they were given (rather than a failure later, when one asks another for data it lacks)."""

    def said(m: int) -> str:
        g = everyone[m]["graph"]
        where = f"{names[m]} on host {everyone[m]['host']}"
        return f"{where} opened {g[0]!r} ({g[1]:,} nodes, {g[2]:,} edges, {g[3]} partitions) from {g[4]}"

    for member, seen in enumerate(everyone):
        if seen["graph"][:4] != everyone[0]["graph"][:4]:
            raise InputError(
                f"the ranks were given different graphs: {said(0)}; {said(member)}. "
                "Give every rank the same partition config"
            )


@handler
def _original_piece(key: str, kind: str, type_name: str, part_id: int) -> torch.Tensor:
    """RPC handler: the original IDs partition ``part_id`` (stored here) holds for one type."""
    return torch.from_numpy(original_piece(registered(f"{_ORIGINALS}/{key}"), kind, type_name, part_id))


class DistGraph:
    """A partitioned graph, served by the members of an RPC group.

    Partition ``p`` is served by members ``p*T ... p*T+T-1``; they share its memory-mapped files. With fewer
    members than partitions, each serves ``P/W`` consecutive partitions as one
    (`graphshard.distributed.stores.partitions`): the book then counts ``W`` partitions. Construction is
    collective.

    Args:
        graph_name: the graph's name, as its config records it.
        part_config: the path of the partition config (``<graph_name>.json``), or the config already loaded.
        group: the RPC group whose members serve the partitions; None: the current RPC group (a session's).
        verify: first check the files of the partitions served against the config's sha256 checksums (a
            run stops, naming the host and file, before corrupt data is used; the hashing reads each file
            once: about 0.6 s per GB from the page cache, 2 s from disk here).
        colocated: read the partitions of other processes of this host that hold the same files in-process
            (sampling and stored features; see `graphshard.distributed.remote.colocated`) instead of over RPC.

    Raises:
        FormatError: the config is missing or invalid, or a partition file is corrupt.
        InputError: the config holds another graph, or a host lacks a partition it must serve, or one of
            its files does not match its checksum; names the host and file.
        DistError: no RPC group is given and none is initialised in this process.
    """

    def __init__(
        self,
        graph_name: str,
        part_config: str | os.PathLike | PartitionConfig,
        group: RpcGroup | None = None,
        verify: bool = True,
        *,
        colocated: bool = True,
    ):
        self.group = group if group is not None else current_group()
        cfg = as_config(part_config)  # a path is read here, once; a loaded config is used as it is
        part_config = cfg.path if isinstance(part_config, PartitionConfig) else part_config
        if cfg.graph_name != graph_name:
            raise InputError(f"{part_config}: holds graph {cfg.graph_name!r}, not {graph_name!r}")
        self.graph_name, self.part_config, self.config = graph_name, str(part_config), cfg
        self.key = f"{graph_name}#{next(_INSTANCES)}"  # same on every member: construction is collective
        _check_partition_files(cfg, self.group, verify)
        self.served = load_served(cfg, self.group.world_size, self.group.lanes, self.group.rank)
        self.part_id, self.book = self.served.part_id, self.served.book
        register(f"{_ORIGINALS}/{self.key}", cfg)
        for book in {
            id(b): b for b in (self.book, self.served.stored_book, *(p.partition_book for p in self.served.parts))
        }.values():
            book.set_original_loader(self._original_ids)
        self.colocated = colocated
        serving = start_serving(self.group, self.served, load_colocated(cfg, self.group, colocated), self.key)
        self.features, self.sampling_graph = serving.features, serving.graph
        self.near_graphs = serving.near_graphs  # co-located partitions
        self._count_degrees()
        self._ndata = {t: DataView(self.features, t) for t in self.book.ntypes}
        self._edata = {et: DataView(self.features, et) for et in self.book.canonical_etypes}

    def _original_ids(self, kind: str, type_name: str) -> np.ndarray:
        """The book's table of original IDs: read here for the partitions this host holds, asked of the
        partition's server (RPC) for the others (each host holds only its own partitions)."""
        cfg, group = registered(f"{_ORIGINALS}/{self.key}"), len(self.served.parts)

        def piece(p: int) -> np.ndarray:
            if original_source(cfg, kind, p).is_file():
                return original_piece(cfg, kind, type_name, p)
            owner = self.group.owner(p // group, self.book.num_partitions())
            return rpc_call(
                self.group,
                owner,
                _original_piece,
                (self.key, kind, type_name, p),
                what=f"original {kind} IDs of partition {p}",
            ).numpy()

        return original_ids(cfg, kind, type_name, piece)

    @property
    def local_graphs(self) -> list[PartitionGraph]:
        """The local graph of every stored partition this process serves (one unless it serves several)."""
        return [part.graph for part in self.served.parts]

    def _count_degrees(self) -> None:
        R = len(self.book.canonical_etypes)
        graphs = [(g, g.indptr.numpy(), g.edata["_TYPE"].numpy(), g.num_inner_nodes) for g in self.local_graphs]
        deg = DegreeTable(
            np.concatenate([in_degree_table(ip, et, n, R) for _, ip, et, n in graphs]), self.sampling_graph.start
        )
        register(f"{_DEGREES}/{self.key}", deg)
        self.group.barrier("degree tables registered")
        if self.group.rank % self.group.per_part(self.book.num_partitions()) == 0:  # one contribution per partition
            counted = [
                source_counts(ip, g.indices.numpy(), et, n, num_nodes=g.num_nodes, num_etypes=R)
                for g, ip, et, n in graphs
            ]
            src = np.concatenate([g.ndata["_ID"].numpy()[c[0]] for (g, *_), c in zip(graphs, counted)])
            et = np.concatenate([c[1] for c in counted])
            counts = np.concatenate([c[2] for c in counted])
            by_owner(
                self.group,
                self.book.nid2partid(src).numpy(),
                self.book.num_partitions(),
                lambda pos: deg.add_out(src[pos], et[pos], counts[pos]),
                remote=_add_out,
                args=lambda pos: (
                    self.key,
                    torch.from_numpy(src[pos]),
                    torch.from_numpy(et[pos]),
                    torch.from_numpy(counts[pos]),
                ),
                what="out-degree count",
            )
        self.group.barrier("out-degrees counted")

    # -- description ----------------------------------------------------------------------------
    @property
    def ntypes(self) -> list[str]:
        return list(self.book.ntypes)

    @property
    def canonical_etypes(self) -> list[EType]:
        return list(self.book.canonical_etypes)

    @property
    def etypes(self) -> list[str]:
        return [et[1] for et in self.book.canonical_etypes]

    def num_nodes(self, ntype: str | None = None) -> int:
        """The number of nodes of the graph.

        Args:
            ntype: count only the nodes of this type; None: every node.

        Returns:
            The node count.

        Raises:
            InputError: ``ntype`` is not a node type of the graph.
        """
        return self.book.num_nodes(ntype)

    def num_edges(self, etype: Any = None) -> int:
        """The number of edges of the graph.

        Args:
            etype: count only the edges of this type (as `canonical_etype` takes it); None: every edge.

        Returns:
            The edge count.

        Raises:
            InputError: ``etype`` is unknown or ambiguous.
        """
        return self.book.num_edges(self.canonical_etype(etype) if etype is not None else None)

    def get_partition_book(self):
        return self.book

    def barrier(self) -> None:
        self.group.barrier("DistGraph.barrier")

    # -- data -------------------------------------------------------------------------------------
    def canonical_etype(self, etype: Any = None) -> EType:
        """The canonical ``(src, rel, dst)`` of an edge type of this graph.

        Args:
            etype: A ``(src, rel, dst)`` tuple, its ``"src:rel:dst"`` spelling, a relation name that names
                one edge type, or None on a graph of a single edge type.

        Returns:
            The canonical edge type, as the partition book lists it.

        Raises:
            InputError: When the edge type is unknown or ambiguous, or None on a graph of several edge types.
        """
        if etype is None:
            return self._single("edge_type", self.canonical_etypes)
        et = parse_etype(etype) if isinstance(etype, str) and ":" in etype else etype
        if isinstance(et, str):
            named = [c for c in self.book.canonical_etypes if c[1] == et]
            if len(named) != 1:
                raise InputError(f"edge type {et!r} is {'ambiguous' if named else 'unknown'}; use (src, rel, dst)")
            et = named[0]
        if tuple(et) not in self.book.canonical_etypes:
            raise InputError(f"unknown edge type {et!r}; known: {self.book.canonical_etypes}")
        return tuple(et)

    def _single(self, kind: str, types: list) -> Any:
        if len(types) != 1:
            raise InputError(f"{kind} needs a single-type graph; use nodes[t].data / edges[etype].data")
        return types[0]

    @property
    def ndata(self) -> DataView:
        return self._ndata[self._single("ndata", self.ntypes)]

    @property
    def edata(self) -> DataView:
        return self._edata[self._single("edata", self.canonical_etypes)]

    @property
    def nodes(self) -> dict:
        return {t: _TypeAccess(self._ndata, t) for t in self.ntypes}

    @property
    def edges(self) -> _EdgeTypes:
        return _EdgeTypes(self)

    def local_edges(self, etype: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Source and destination of the edges of ``etype`` this partition owns (those into its inner nodes).

        Together over all partitions, every edge once.

        Args:
            etype: the edge type (as `canonical_etype` takes it); None on a graph of a single edge type.

        Returns:
            ``(src, dst)``: per-type node IDs of the edges' ends.

        Raises:
            InputError: the edge type is unknown or ambiguous, or None on a graph of several edge types.
        """
        src, dst, _ = self.local_edge_ids(etype)
        return src, dst

    def local_edge_ids(self, etype: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`local_edges` and, third, each edge's per-type edge ID (what ``edges[etype].data`` reads).

        Args:
            etype: the edge type (as `canonical_etype` takes it); None on a graph of a single edge type.

        Returns:
            ``(src, dst, eid)``: per-type node IDs of the edges' ends and their per-type edge IDs.

        Raises:
            InputError: the edge type is unknown or ambiguous, or None on a graph of several edge types.
        """
        et = self.canonical_etype(etype)
        srcs, dsts, ids = [], [], []
        for g in self.local_graphs:
            indptr = g.indptr.numpy()
            keep = g.edata["inner_edge"].numpy().astype(bool) & (
                g.edata["_TYPE"].numpy() == self.book.canonical_etypes.index(et)
            )
            gid = g.ndata["_ID"].numpy()
            dsts.append(gid[np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))[keep]])
            srcs.append(gid[g.indices.numpy()[keep]])
            ids.append(g.edata["_ID"].numpy()[keep].astype(np.int64))
        src, dst, eid = np.concatenate(srcs), np.concatenate(dsts), np.concatenate(ids)
        per_type = self.book.map_to_per_etype(eid)[1].numpy()
        return self.book.map_to_per_ntype(src)[1].numpy(), self.book.map_to_per_ntype(dst)[1].numpy(), per_type

    # -- degrees ----------------------------------------------------------------------------------
    def in_degrees(self, ids: Any, etype: Any = None) -> torch.Tensor:
        """In-degrees of nodes ``ids``.

        Args:
            ids: per-type IDs of ``etype``'s destination type (tensor, array, list or scalar).
            etype: the edge type (as `canonical_etype` takes it); None: the edge type of a graph of a single
                edge type.

        Returns:
            The in-degree of each node along ``etype``.

        Raises:
            InputError: the edge type is unknown or ambiguous, or None on a graph of several edge types;
                IDs that are not integers.
            IDRangeError: an ID out of range.
        """
        return self._degrees("in", ids, etype)

    def out_degrees(self, ids: Any, etype: Any = None) -> torch.Tensor:
        """Out-degrees of nodes ``ids``.

        Args:
            ids: per-type IDs of ``etype``'s source type (tensor, array, list or scalar).
            etype: the edge type (as `canonical_etype` takes it); None: the edge type of a graph of a single
                edge type.

        Returns:
            The out-degree of each node along ``etype``.

        Raises:
            InputError: the edge type is unknown or ambiguous, or None on a graph of several edge types;
                IDs that are not integers.
            IDRangeError: an ID out of range.
        """
        return self._degrees("out", ids, etype)

    def _degrees(self, kind: str, ids: Any, etype: Any) -> torch.Tensor:
        if etype is None:
            et, r = self._single("degrees", self.canonical_etypes), None
        else:
            et = self.canonical_etype(etype)
            r = self.book.canonical_etypes.index(et)
        ntype = et[2] if kind == "in" else et[0]
        gids = self.book.map_to_homo_nid(as_id_array(ids, f"node IDs of {ntype!r}"), ntype).numpy()
        pieces = by_owner(
            self.group,
            self.book.nid2partid(gids).numpy(),
            self.book.num_partitions(),
            None,
            remote=_degrees,
            args=lambda pos: (self.key, kind, torch.from_numpy(gids[pos]), r),
            what=f"{kind}-degree",
        )
        out = torch.empty(gids.shape[0], dtype=torch.int64)
        for pos, got in pieces:
            out[torch.from_numpy(pos)] = got
        return out


class _EdgeTypes:
    def __init__(self, g: DistGraph):
        self.g = g

    def __getitem__(self, etype: Any) -> _TypeAccess:
        return _TypeAccess(self.g._edata, self.g.canonical_etype(etype))

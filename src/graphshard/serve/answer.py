"""The rows a batch of queries asks for, computed by the serving rank with the restored model.

Existing nodes: their original IDs become graphshard's IDs through the original-ID map (held whole by this
rank up to :data:`WHOLE_MAP_NODES`, else sharded: :class:`~graphshard.distributed.runtime.original.OriginalIds`),
their L-hop neighbourhoods are sampled with the served fanouts (every in-edge by default) and their feature
rows fetched from the partitions that own them, one request per owner; the model's forward pass over that
subgraph gives their rows, which with every in-edge equal the layer-wise outputs ``graphshard embed`` writes.
The queries of one batch share one subgraph per node type (at most ``chunk`` seeds each).

New nodes: the (L-1)-hop neighbourhoods of their in-neighbours (of any types) are sampled, and the new nodes
are appended to their type's rows of that subgraph with their own rows and edges: in-edges from their
in-neighbours, and out-edges to any sampled node they send to. Nothing is written to the stored graph. New
nodes without out-edges share one subgraph (none changes another's inputs); each with out-edges gets its own.

Stale rows: the precomputed outputs of ``graphshard embed`` (``--embeddings``), read from the memory-mapped
file by original ID, without sampling or the model."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..device.transfer import DeviceFeeder
from ..distributed.loaders.batch import BatchMaker, BatchRequest, BatchSpec
from ..distributed.runtime.original import OriginalIds
from ..errors import FormatError
from ..format.npyfile import read_npy
from ..models.contract import layerwise_traits
from ..models.stack import ConvStack
from ..tasks.inputs import rows_of
from ..tasks.restore import Restored
from .queries import NewNode, Query, RequestError

WHOLE_MAP_NODES = 1 << 24  # original-ID maps held whole by the serving rank: this many nodes together (128 MiB)
READ_BLOCK = 1 << 20  # map entries read at a time when one is copied whole


class WholeMap:
    """An original-ID map (:class:`OriginalIds`) copied whole into this process: the same lookups, from memory."""

    def __init__(self, sharded: OriginalIds):
        self.count = sharded.count
        self.table = np.empty(self.count, dtype=np.int64)
        for lo in range(0, self.count, READ_BLOCK):  # a loop over blocks
            hi = min(self.count, lo + READ_BLOCK)
            self.table[lo:hi] = sharded(np.arange(lo, hi, dtype=np.int64))

    def __call__(self, orig: np.ndarray) -> np.ndarray:
        """New per-type IDs of original IDs ``orig`` (checked to be in range by the request's parser)."""
        return self.table[orig]


@dataclass(frozen=True)
class Head:
    """What answers a query: ``module`` (the encoder, or its hidden-layer view) and the layers it runs."""

    module: Any
    layers: int


class HiddenLayer(nn.Module):
    """A :class:`~graphshard.models.stack.ConvStack` up to the hidden layer its last layer reads, after its ReLU
    (what ``embed --embedding-layer hidden`` writes): the same convolutions, one fewer."""

    def __init__(self, stack: ConvStack):
        super().__init__()
        self.stack = copy.copy(stack)
        self.stack._modules = dict(stack._modules)  # its own module table: the original keeps every layer
        self.stack.convs = nn.ModuleList(list(stack.convs)[:-1])

    def forward(self, x: Any, edge_index: Any, hops: Any = None, edge_attr: Any = None) -> torch.Tensor:
        return torch.relu(self.stack(x, edge_index, hops, edge_attr))


def hidden_layer(encoder: nn.Module) -> HiddenLayer | None:
    """The hidden-layer view of ``encoder`` (None where it has none: not a stack of 2+ convolutions)."""
    return HiddenLayer(encoder) if isinstance(encoder, ConvStack) and encoder.num_layers >= 2 else None


class Answerer:
    """Computes the rows of queries on the serving rank (see the module docstring). ``fanouts``: per layer,
    -1 for every in-edge; ``stale``: per node type, the precomputed rows (original ID order); ``key``: the
    sampling seed (answers do not change between identical requests)."""

    def __init__(
        self,
        restored: Restored,
        fanouts: list[int],
        stale: dict[str, np.ndarray] | None = None,
        key: int = 0,
        *,
        chunk: int = 1024,
        hidden: HiddenLayer | None = None,
    ):
        self.r, self.fanouts, self.stale, self.key, self.chunk = restored, fanouts, stale or {}, key, chunk
        self.exact = all(f == -1 for f in fanouts)  # every in-edge: the answers are layer-wise inference's
        self.output = Head(restored.encoder, len(fanouts))
        self.hidden = None if hidden is None else Head(hidden, len(fanouts) - 1)  # /v1/embed's rows, if set
        g = restored.g
        self.book = g.get_partition_book()
        self.hetero = restored.inputs.hetero
        self.maps: dict[str, OriginalIds | WholeMap] = {}  # built collectively at start (see open_maps)
        self._makers: dict[tuple[str, int, int], BatchMaker] = {}
        self.device = restored.inputs.device  # the model's; batches are built on the host and copied there
        self.feeder = DeviceFeeder(self.device)
        self.part = g.group.part_id(self.book.num_partitions())
        self.remote_rows = 0  # sampled rows owned by other partitions, since the metrics last took them

    def open_maps(self) -> None:
        """Build the original-ID maps of every node type (requests name nodes of the answered types, new nodes'
        edges those of any type; collective: every rank calls it at start)."""
        self.maps = {t: OriginalIds(self.r.g, t) for t in self.r.g.ntypes}

    def hold_maps(self, most: int = WHOLE_MAP_NODES) -> None:
        """Hold maps whole in this process (8 bytes a node), the answered types' first, while they come to at
        most ``most`` nodes together: a request then finds its nodes without a round trip (not collective)."""
        held = 0
        for t in sorted(self.maps, key=lambda t: t not in self.r.types):
            sharded = self.maps[t]
            if isinstance(sharded, OriginalIds) and held + sharded.count <= most:
                self.maps[t], held = WholeMap(sharded), held + sharded.count

    def take_remote_rows(self) -> int:
        """The remote rows counted since the last call (for the metrics, from the batcher's thread)."""
        rows, self.remote_rows = self.remote_rows, 0
        return rows

    # -- a batch of queries -----------------------------------------------------------------------
    def answer_each(self, queries: list[Query]) -> list[np.ndarray | Exception]:
        """:meth:`answer`, or when the batch fails, each query on its own: a query fails (with its error in place
        of its rows) only if it fails alone, so a lost partition fails just the queries that reach it."""
        try:
            return list(self.answer(queries))
        except Exception:
            if len(queries) == 1:
                raise
        out: list[np.ndarray | Exception] = []
        for q in queries:
            try:
                out.append(self.answer([q])[0])
            except Exception as exc:
                out.append(exc)
        return out

    def answer(self, queries: list[Query]) -> list[np.ndarray]:
        """One float32 array per query, in its order: rows of its nodes (existing, or its new nodes), or for
        ``pairs`` one score per pair (the link model's decoder on both ends' rows)."""
        flat: list[Query] = []
        for q in queries:
            flat += self._ends(q) if q.pairs is not None else [q]
        rows, out, k = self._rows(flat), [], 0
        for q in queries:
            if q.pairs is None:
                out.append(rows[k])
                k += 1
            else:
                out.append(self._score(rows[k], rows[k + 1]))
                k += 2
        return out

    def _ends(self, q: Query) -> list[Query]:
        """The two ends of ``q``'s pairs as queries of rows."""
        assert q.pairs is not None and self.r.edge_type is not None
        s_type, _, d_type = self.r.edge_type
        return [replace(q, ntype=t, ids=q.pairs[end], pairs=None) for end, t in enumerate((s_type, d_type))]

    def _score(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """A link model's score per pair, or an edge task's outputs per edge (a row each)."""
        decoder: Any = self.r.model.decoder  # a LinkModel's (nn.Module attributes are typed as tensors too)
        with torch.no_grad():
            scores = decoder(torch.from_numpy(src).to(self.device), torch.from_numpy(dst).to(self.device))
            scores = scores if self.r.task == "edge" else scores.view(-1)
            return scores.float().cpu().numpy().astype(np.float32)

    def _head(self, q: Query) -> Head:
        """``/v1/embed`` answers the hidden layer when the service was started so; everything else the output."""
        return self.hidden if q.kind == "embed" and self.hidden is not None else self.output

    def _rows(self, queries: list[Query]) -> list[np.ndarray]:
        out: list[np.ndarray | None] = [None] * len(queries)
        fresh: dict[tuple[str, Head], list[int]] = {}
        for i, q in enumerate(queries):
            if q.stale and q.kind == "predict" and self.hidden is not None:
                raise RequestError(422, "the precomputed rows are the hidden layer's: no stale predictions", "stale")
            if q.stale:
                out[i] = np.asarray(self.stale[q.ntype][q.ids], dtype=np.float32)
            elif q.new:
                out[i] = self._new_nodes(q.ntype, list(q.new), self._head(q))
            else:
                fresh.setdefault((q.ntype, self._head(q)), []).append(i)
        for (ntype, head), which in fresh.items():
            ids = np.concatenate([queries[i].ids for i in which])
            rows = self._existing(ntype, self.maps[ntype](ids), head)
            at = 0
            for i in which:
                n = int(queries[i].ids.shape[0])
                out[i], at = rows[at : at + n], at + n
        return [o if o is not None else np.zeros((0, 0), np.float32) for o in out]

    # -- existing nodes ---------------------------------------------------------------------------
    def _existing(self, ntype: str, ids: np.ndarray, head: Head) -> np.ndarray:
        """Rows of nodes ``ids`` (new per-type IDs, any order, repeats allowed)."""
        seeds, inverse = np.unique(ids, return_inverse=True)
        cuts = range(0, seeds.shape[0], self.chunk)
        pieces = [self._forward(ntype, seeds[lo : lo + self.chunk], head) for lo in cuts]
        rows = np.concatenate(pieces) if pieces else np.zeros((0, 0), np.float32)
        return rows[inverse.reshape(-1)]

    def _forward(self, ntype: str, seeds: np.ndarray, head: Head) -> np.ndarray:
        batch = self._maker(ntype, 0, head.layers)(BatchRequest(0, self.key, seeds))
        self._count(batch)
        with torch.no_grad():
            out = rows_of(head.module(*self.r.inputs(self.feeder.now(batch))), ntype)[: seeds.shape[0]]
        return out.float().cpu().numpy().astype(np.float32, copy=False)

    def _hops(self, first: int, layers: int) -> list[int]:
        """The fanouts sampled from hop ``first`` of the answer's computation (0: the answered nodes; 1: the
        in-neighbours of new nodes) to hop ``layers``, and one hop more of every in-edge for a model
        normalising by in-degrees (GCN), so that every node whose row the answer reads has its whole in-degree
        in the subgraph, as layer-wise inference has it (when every in-edge is sampled)."""
        extra = [-1] if self.exact and layerwise_traits(self.r.encoder).wants_degrees else []
        return self.fanouts[first:layers] + extra

    def _maker(self, ntype: str, first: int, layers: int) -> BatchMaker:
        key = (ntype, first, layers)
        if key not in self._makers:
            g = self.r.g
            spec = BatchSpec(
                self._hops(first, layers),
                label_name=None,
                input_type=ntype if self.hetero else None,
                **self.r.inputs.loader_options(),
            )
            self._makers[key] = BatchMaker(spec, g.group, g.sampling_graph, g.features, book=g.book, near=g.near_graphs)
        return self._makers[key]

    def _count(self, batch: Any) -> None:
        stores = [(batch[t], t) for t in batch.node_types] if self.hetero else [(batch, None)]
        for store, ntype in stores:
            if "n_id" in store:
                owners = self.book.nid2partid(store.n_id, ntype).numpy()
                self.remote_rows += int((owners != self.part).sum())

    # -- new nodes --------------------------------------------------------------------------------
    def _new_nodes(self, ntype: str, nodes: list[NewNode], head: Head) -> np.ndarray:
        shared = [i for i, n in enumerate(nodes) if not n.out_edges]
        alone = [i for i, n in enumerate(nodes) if n.out_edges]
        rows: list[np.ndarray | None] = [None] * len(nodes)
        for group in ([shared] if shared else []) + [[i] for i in alone]:
            for i, row in zip(group, self._new_group(ntype, [nodes[i] for i in group], head)):
                rows[i] = row
        return np.stack([r for r in rows if r is not None])

    def _new_group(self, ntype: str, nodes: list[NewNode], head: Head) -> np.ndarray:
        """Rows of new nodes that may share one subgraph (none sends to a node another one reads): the
        (L-1)-hop neighbourhood of their in-neighbours, with the new nodes appended to their type's rows and
        their edges added."""
        ins = [{et: self.maps[et[0]](ids) for et, ids in n.edges.items()} for n in nodes]
        outs = [{et: self.maps[et[2]](ids) for et, ids in n.out_edges.items()} for n in nodes]
        x, edges, n_id = self._neighbourhood(ntype, ins, head.layers)
        base = x[ntype].shape[0]
        rows = torch.from_numpy(np.stack([n.features for n in nodes])).to(self.device)
        x[ntype] = torch.cat([x[ntype], rows.to_sparse() if x[ntype].is_sparse else rows])
        where = {t: (ids, np.argsort(ids, kind="stable")) for t, ids in n_id.items()}
        added: dict[Any, list[np.ndarray]] = {}
        for j, (i_lists, o_lists) in enumerate(zip(ins, outs)):
            me = base + j
            for et, ids in i_lists.items():
                added.setdefault(et, []).append(np.stack([_positions(*where[et[0]], ids), np.full(ids.shape[0], me)]))
            for et, ids in o_lists.items():
                present = ids[np.isin(ids, n_id[et[2]])]  # nodes outside the subgraph do not reach node j
                added.setdefault(et, []).append(
                    np.stack([np.full(present.shape[0], me), _positions(*where[et[2]], present)])
                )
        for et, pieces in added.items():
            more = torch.from_numpy(np.concatenate(pieces, axis=1).astype(np.int64)).to(self.device)
            edges[et] = torch.cat([edges[et], more], dim=1)
        with torch.no_grad():
            if self.hetero:
                out = head.module(x, edges, None)
            else:
                (xs,), (ei,) = x.values(), edges.values()
                out = head.module(xs, ei)
        return rows_of(out, ntype)[base : base + len(nodes)].float().cpu().numpy().astype(np.float32, copy=False)

    def _neighbourhood(
        self, ntype: str, ins: list[dict[Any, np.ndarray]], layers: int
    ) -> tuple[dict[str, torch.Tensor], dict[Any, torch.Tensor], dict[str, np.ndarray]]:
        """The model's inputs over the (L-1)-hop neighbourhood of the in-neighbours ``ins`` (new IDs per edge
        type), per node type and edge type, and each type's sampled nodes (per-type IDs, in row order)."""
        by_type: dict[str, list[np.ndarray]] = {}
        for lists in ins:
            for et, ids in lists.items():
                by_type.setdefault(et[0], []).append(ids)
        homo = [self.book.map_to_homo_nid(np.concatenate(v), t).numpy() for t, v in by_type.items()]
        seeds = np.unique(np.concatenate(homo)) if homo else np.zeros(0, np.int64)
        types, etypes = self.r.inputs.ntypes, self.r.inputs.etypes
        if not seeds.shape[0]:
            x = {t: torch.zeros((0, self.r.inputs.dims[t]), device=self.device) for t in types}
            edges = {et: torch.zeros((2, 0), dtype=torch.long, device=self.device) for et in etypes}
            return x, edges, {t: np.zeros(0, np.int64) for t in types}
        batch = self._maker(ntype, 1, layers).around(seeds, self.key)
        self._count(batch)
        batch = self.feeder.now(batch)
        got = self.r.inputs(batch)
        if self.hetero:
            n_id = {t: batch[t].n_id.numpy() if t in batch.node_types else np.zeros(0, np.int64) for t in types}
            return dict(got[0]), dict(got[1]), n_id
        return {types[0]: got[0].float()}, {etypes[0]: got[1]}, {types[0]: batch.n_id.numpy()}


def _positions(n_id: np.ndarray, order: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Where each of ``ids`` (all present) is in ``n_id`` (``order``: its argsort)."""
    return order[np.searchsorted(n_id, ids, sorter=order)]


def open_stale(path: str | os.PathLike, types: list[str], counts: dict[str, int], width: int) -> dict[str, np.ndarray]:
    """The precomputed outputs ``graphshard embed`` wrote at ``path`` (a ``.npy`` file, or a directory of
    ``<node type>.npy``), memory-mapped, each checked to be float32 rows of ``width`` for every node of its
    type; a :class:`FormatError` names the file and what is wrong."""
    base = Path(path)
    files = {t: base / f"{t}.npy" for t in types} if base.is_dir() else {types[0]: base}
    if not base.is_dir() and len(types) > 1:
        raise FormatError(f"{path}: the model answers for node types {types}: give embed's directory of them")
    out = {}
    for t, f in files.items():
        arr = read_npy(f, FormatError, mmap=True)  # a damaged or missing file is named, never a raw error
        want = (counts[t], width)
        if arr.dtype != np.float32 or arr.shape != want:
            raise FormatError(
                f"{f}: expected float32 rows {want} (every node of type {t!r}, as wide as the served layer; "
                f"graphshard embed's output), found {arr.dtype} {arr.shape}"
            )
        out[t] = arr
    return out

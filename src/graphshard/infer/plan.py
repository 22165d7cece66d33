"""Which rows a rank computes and reads in layer-wise inference (:mod:`.layerwise`): its share of a stored
partition's own nodes, every local row those destinations read, each row's type and position, and the runs of
destinations one chunk computes at a time."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import KW_ONLY, dataclass, field

import numpy as np
import torch

from ..distributed.runtime.graph import DistGraph
from ..format.load import PartitionGraph
from ..graph import EType

EDGES_PER_CHUNK = 1 << 21  # edges of one layer computed at once (their temporaries: ~120 MB)
NODES_PER_CHUNK = 1 << 18  # and destinations at most (their rows' temporaries: a few of 64 MiB at 64 columns)


@dataclass
class Plan:
    """This rank's destination rows (local IDs ``[dst_lo, dst_hi)`` of its partition) and every local row
    they read (``need``: sorted local IDs, sources and destinations), with each row's type and per-type ID.
    ``slot`` maps a local ID to its index in ``need`` (-1: not needed)."""

    indptr: np.ndarray
    indices: np.ndarray
    etype: np.ndarray
    dst_lo: int
    _: KW_ONLY
    dst_hi: int
    need: np.ndarray
    slot: np.ndarray
    need_type: np.ndarray
    need_tid: np.ndarray
    pos_in_type: np.ndarray  # position of each ``need`` row among the rows of its type
    remote: np.ndarray  # per ``need`` row: owned by another partition
    ntypes: list[str]
    etypes: list[EType]
    edge_ids: np.ndarray | None = None  # homogeneous ID of every stored edge (to read edge features)
    degree: dict[str, torch.Tensor] = field(default_factory=dict)  # per type: in-degree of each ``need`` row
    fetched: list[int] = field(default_factory=list)  # remote rows read per layer (inputs first)
    prefix: dict[str, int] = field(default_factory=dict)  # per type: own rows that lead its need rows (own_prefix)
    storage: dict[str, torch.Tensor] = field(default_factory=dict)  # per type: a layer's outputs and next inputs

    def of_type(self, t: int) -> np.ndarray:
        return self.need_tid[self.need_type == t]


def plan(g: DistGraph, part: PartitionGraph) -> Plan:
    """Split the inner nodes of ``part`` (a stored partition this rank serves) among the ranks that share
    it and find the rows they read."""
    book = g.get_partition_book()
    indptr, indices = part.indptr.numpy(), part.indices.numpy()
    inner = int(part.ndata["inner_node"].sum())
    k = g.group.per_part(book.num_partitions())
    j = g.group.rank % k
    lo, hi = inner * j // k, inner * (j + 1) // k
    wanted = np.zeros(indptr.shape[0] - 1, dtype=bool)
    wanted[indices[indptr[lo] : indptr[hi]]] = True
    wanted[lo:hi] = True
    need = np.flatnonzero(wanted)
    slot = np.full(wanted.shape[0], -1, dtype=np.int64)
    slot[need] = np.arange(need.shape[0])
    gids = part.ndata["_ID"].numpy()[need]
    types, tids = (t.numpy() for t in book.map_to_per_ntype(gids))
    served = g.sampling_graph
    remote = (gids < served.start) | (gids >= served.start + served.count)  # owned by another process
    pos = np.empty(need.shape[0], dtype=np.int64)
    for t in range(len(book.ntypes)):
        sel = types == t
        pos[sel] = np.arange(int(sel.sum()))
    etype = part.edata["_TYPE"].numpy() if "_TYPE" in part.edata else np.zeros(indices.shape[0], np.int64)
    return Plan(
        indptr,
        indices,
        etype,
        lo,
        dst_hi=hi,
        need=need,
        slot=slot,
        need_type=types,
        need_tid=tids,
        pos_in_type=pos,
        remote=remote,
        ntypes=list(book.ntypes),
        etypes=list(book.canonical_etypes),
        edge_ids=part.edata["_ID"].numpy(),
    )


def dst_rows(p: Plan, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices into ``need`` of destinations ``[lo, hi)``, and each one's position among its type's chunk rows."""
    at = p.slot[lo:hi]
    chunk_pos = np.empty(at.shape[0], dtype=np.int64)
    for t in range(len(p.ntypes)):
        sel = p.need_type[at] == t
        chunk_pos[sel] = np.arange(int(sel.sum()))
    return at, chunk_pos


def own_prefix(g: DistGraph, p: Plan) -> dict[str, int]:
    """Per node type: the number of this rank's destinations of the type, where they are exactly its shard of
    a layer's table (one process per partition, one partition per process) and the first of the type's need
    rows, in the same order; then one tensor holds the shard and, after it, the next layer's other inputs
    (no copy of the shard in the inputs: at the peak one row per needed node, not one more per own node)."""
    book = g.get_partition_book()
    if g.group.per_part(book.num_partitions()) != 1 or len(g.local_graphs) != 1:
        return {}
    part = g.group.part_id(book.num_partitions())
    out = {}
    for ti, t in enumerate(p.ntypes):
        lo, hi = book.node_range(part, t)
        ids, mine = p.need_tid[p.need_type == ti], p.need_tid[dst_types(p, ti)]
        own = np.arange(lo, hi)
        if np.array_equal(mine, own) and np.array_equal(ids[: hi - lo], own):
            out[t] = hi - lo
    return out


def chunks(p: Plan, edges: int, nodes: int = NODES_PER_CHUNK) -> Iterator[tuple[int, int]]:
    """This rank's destinations ``[lo, hi)`` in runs of about ``edges`` in-edges and at most ``nodes`` nodes (at
    least one node each): a layer's temporaries are rows of the chunk's destinations, so a partition of many
    nodes and few edges (R-MAT's isolated nodes) must not become one chunk of every node."""
    lo = p.dst_lo
    while lo < p.dst_hi:
        hi = int(np.searchsorted(p.indptr, p.indptr[lo] + edges, side="right")) - 1
        hi = min(max(hi, lo + 1), p.dst_hi, lo + nodes)
        yield lo, hi
        lo = hi


def dst_types(p: Plan, t: int) -> np.ndarray:
    """Indices into ``need`` of this rank's destinations of type ``t``, in local order."""
    at = p.slot[p.dst_lo : p.dst_hi]
    return at[p.need_type[at] == t]

"""The user's original node IDs to graphshard's new IDs without a table of the whole graph on any rank
(issue 28): a sharded map, for the ranks that must find nodes by original ID (held-out edges and negatives
of link prediction, embeddings written in original order).

The map of a node type is a :class:`~graphshard.distributed.remote.tensor.DistTensor` of int64 whose row ``o``
holds the new ID of original ID ``o``. A DistTensor keeps row ``o`` with the partition that owns *new*
ID ``o``; since a type's original IDs are a permutation of ``[0, n)`` like its new IDs, each partition
holds exactly as many entries as it owns nodes: 8 bytes per owned node on the partition's serving
process, a range of original IDs, nothing on the others. It is built from each partition's own stored
original IDs (:func:`~graphshard.format.load.original_piece`, or the loaded partition's ``node/orig_id``):
the partition's first process writes its (original, new) pairs to their owners, then the map is checked
to be complete (every original ID written once) on every rank.

Why a DistTensor and not a map served by collective all-to-all exchanges: a lookup is then an ordinary
read (one bounded RPC per partition touched, errors naming the server), not collective, so a rank looks
up what it alone needs (the writer of embeddings, a rank with more blocks of negatives than another)
without the other ranks having to join the same number of exchanges; the cost is the same 16 bytes per
ID looked up. Why not outputs keyed by original ID (no translation): that copies every node's outputs
across the network at every evaluation, where translating costs 16 bytes per candidate row fetched (a
fraction of the row itself)."""

from __future__ import annotations

import itertools
import json
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ...errors import FormatError, IDRangeError
from ...format.load import original_piece
from ...ids import as_id_array
from ..remote.tensor import DistTensor, local_shard

if TYPE_CHECKING:
    from .graph import DistGraph

_MAPS = itertools.count()  # construction is collective, so every rank numbers its maps alike


class OriginalIds:
    """Original per-type IDs of ``ntype`` → per-type new IDs, sharded over the partitions (see the module
    docstring). Construction and :meth:`free` are collective over ``g``'s group; lookups are not."""

    def __init__(self, g: DistGraph, ntype: str):
        book = g.get_partition_book()
        self.g, self.ntype, self.count = g, ntype, book.num_nodes(ntype)
        self.table = DistTensor(
            g.group,
            book,
            (self.count,),
            torch.int64,
            name=f"original-ids{next(_MAPS)}/{ntype}#{g.key}",
            ntype=ntype,
            init=lambda shape, dtype: torch.full(shape, -1, dtype=dtype),
        )
        first = g.group.rank % g.group.per_part(book.num_partitions()) == 0
        problem = ""
        if first:  # one writer per served partition: its (original, new) pairs, to their owners
            try:
                for i, p in enumerate(g.served.stored_ids):
                    orig = _stored_original(g, i, ntype)
                    lo, hi = g.served.stored_book.node_range(p, ntype)
                    _check_piece(g, p, ntype, orig, count=self.count)
                    self.table[orig] = torch.arange(lo, hi, dtype=torch.int64)
            except FormatError as exc:
                problem = str(exc)
        g.group.barrier(f"original IDs of {ntype!r} written")
        shard = local_shard(self.table.name)
        if not problem and shard is not None and bool((shard.rows < 0).any()):
            lo, _ = book.node_range(g.group.part_id(book.num_partitions()), ntype)
            missing = lo + int(torch.argmax((shard.rows < 0).to(torch.uint8)))
            problem = (
                f"{g.config.path}: the original node IDs of type {ntype!r} stored with its partitions are not a "
                f"permutation: original ID {missing} is missing (another one repeats)"
            )
        said = [json.loads(b) for b in g.group.all_gather(json.dumps(problem).encode(), f"original IDs of {ntype!r}")]
        if any(said):
            self.table.free()
            raise FormatError(next(s for s in said if s))

    def __call__(self, orig: Any) -> np.ndarray:
        """The new per-type IDs (int64 array) of original IDs ``orig`` of this type; an
        :class:`~graphshard.errors.IDRangeError` names the type and the first ID outside ``[0, count)``."""
        ids = as_id_array(orig, f"original IDs of node type {self.ntype!r}")
        bad = (ids < 0) | (ids >= self.count)
        if bad.any():
            raise IDRangeError(
                f"original node ID {int(ids[np.argmax(bad)])} of type {self.ntype!r} is out of range "
                f"[0, {self.count}) ({int(bad.sum())} such IDs)"
            )
        return self.table[ids].numpy()

    def free(self) -> None:
        """Drop the map's shards (collective)."""
        self.table.free()


def _stored_original(g: DistGraph, i: int, ntype: str) -> np.ndarray:
    """The original IDs of the nodes of ``ntype`` that the ``i``-th stored partition this process serves owns,
    in new-ID order: from its ``orig_nids`` file when it has one (as :func:`original_piece` reads them), else
    from the partition already loaded (its ``node/orig_id``, no second read of the graph file)."""
    cfg, p = g.config, g.served.first + i
    if cfg.parts[p].get("orig_nids"):
        return original_piece(cfg, "node", ntype, p)
    lo, hi = (int(x) for x in cfg.node_map[ntype][p])
    ndata = g.served.parts[i].graph.ndata
    base = int(ndata["_ID"][0]) if hi > lo else lo  # inner nodes are the local prefix, in new-ID order
    return ndata["orig_id"][lo - base : hi - base].numpy().astype(np.int64)


def _check_piece(g: DistGraph, p: int, ntype: str, orig: np.ndarray, *, count: int) -> None:
    bad = (orig < 0) | (orig >= count)
    if bad.any():
        raise FormatError(
            f"{g.config.path}: partition {p} stores original node ID {int(orig[np.argmax(bad)])} for a node of "
            f"type {ntype!r}, outside [0, {count}): the original IDs are not a permutation"
        )

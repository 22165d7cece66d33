"""Layer-wise inference: the model's output for every node, computed one layer at a time for all nodes.

Each rank computes the rows of its share of its partition's own (inner) nodes. A layer reads the previous
layer's rows of those nodes and of their in-neighbours: rows of the partition are read where they are,
rows of other partitions (the HALO) are fetched in one bulk read per layer. Layer outputs live in
:class:`DistTensor`\\ s, one per node type, freed once the next layer has read them. The work is
O(layers × edges): every edge is used once per layer, unlike mini-batch inference over sampled
neighbourhoods, which recomputes a node's L-hop neighbourhood for every batch that reaches it. The result is
exact: the same as the model's forward pass over the whole graph (in eval mode, without sampling).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..distributed.remote.tensor import DistTensor, local_shard
from ..distributed.runtime.graph import DistGraph
from ..distributed.transport.liveness import doing, now_doing
from ..graph import EType
from ..ids import consecutive
from ..models.contract import LayerwiseTraits, layerwise_traits
from ..models.layer_context import LayerContext
from .on_device import chunk_on, inputs_on
from .plan import EDGES_PER_CHUNK, Plan, chunks, dst_rows, dst_types, own_prefix, plan

log = logging.getLogger(__name__)

Rows = Callable[[str, torch.Tensor], torch.Tensor]  # (node type, per-type IDs) -> input rows
EdgeRows = Callable[[EType, torch.Tensor], torch.Tensor]  # (edge type, per-type edge IDs) -> feature rows


def _chunk(
    model: Any,
    i: int,
    p: Plan,
    x: dict[str, torch.Tensor],
    *,
    lo: int,
    hi: int,
    traits: LayerwiseTraits,
    edge_rows: EdgeRows | None,
    device: torch.device | None = None,
) -> tuple[np.ndarray, dict[str, torch.Tensor]]:
    """Layer ``i`` for destinations ``[lo, hi)``: (their indices into ``need``, output rows per type); on
    ``device`` when given (see :mod:`.on_device`), else where ``x`` is. ``traits``: the model's."""
    at, chunk_pos = dst_rows(p, lo, hi)
    dst_pos = {t: p.pos_in_type[at[p.need_type[at] == ti]] for ti, t in enumerate(p.ntypes) if t in x}
    e0, e1 = int(p.indptr[lo]), int(p.indptr[hi])
    src = p.pos_in_type[p.slot[p.indices[e0:e1]]]
    dst = np.repeat(chunk_pos, np.diff(p.indptr[lo : hi + 1]))  # edges are listed destination by destination
    pairs: dict[EType, tuple[np.ndarray, np.ndarray]] = {}
    picks: dict[EType, slice | np.ndarray] = {}  # the stored edges of each type: a run, or positions
    if len(p.etypes) == 1:
        pairs[p.etypes[0]], picks[p.etypes[0]] = (src, dst), slice(e0, e1)
    else:
        etype = p.etype[e0:e1]
        for r, et in enumerate(p.etypes):
            sel = etype == r
            pairs[et], picks[et] = (src[sel], dst[sel]), e0 + np.flatnonzero(sel)
    ctx = _context(p, at, picks, edge_rows) if traits.layer_context else None
    if device is not None:
        return at, chunk_on(model, i, x, dst_pos, edges=pairs, context=ctx, device=device)
    x_dst = {t: _rows(x[t], pos) for t, pos in dst_pos.items()}
    edges = {et: torch.from_numpy(np.stack(pair)) for et, pair in pairs.items()}
    return at, model.layer(i, x, x_dst, edges) if ctx is None else model.layer(i, x, x_dst, edges, context=ctx)


def _context(
    p: Plan, at: np.ndarray, picks: dict[EType, slice | np.ndarray], edge_rows: EdgeRows | None
) -> LayerContext:
    """What a model with ``layer_context`` learns of the chunk of destinations ``at`` (indices into ``need``)
    whose edges of each type are the stored edges ``picks[et]``."""
    ctx = LayerContext({})
    for ti, t in enumerate(p.ntypes):
        mine = at[p.need_type[at] == ti]
        ctx.dst_in_src[t] = torch.from_numpy(p.pos_in_type[mine])
        if t in p.degree:
            ctx.src_degree[t] = p.degree[t]
            ctx.dst_degree[t] = p.degree[t][ctx.dst_in_src[t]]
    if edge_rows is not None and p.edge_ids is not None:
        for et, pick in picks.items():
            ctx.edge_attr[et] = edge_rows(et, torch.from_numpy(p.edge_ids[pick].astype(np.int64)))
    return ctx


def _rows(x: torch.Tensor, pos: np.ndarray) -> torch.Tensor:
    """``x[pos]``: a view when ``pos`` is a run of consecutive rows (a partition's own nodes usually are)."""
    run = consecutive(pos)
    return x[run] if run is not None else x[torch.from_numpy(pos)]


def _layer(
    model: Any,
    i: int,
    p: Plan,
    x: dict[str, torch.Tensor],
    *,
    traits: LayerwiseTraits,
    edge_rows: EdgeRows | None = None,
    grow: bool = False,
    device: torch.device | None = None,
) -> dict[str, torch.Tensor]:
    """Layer ``i`` for all destinations of the plan, in chunks of about :data:`EDGES_PER_CHUNK` edges (the
    model's ``layer_edges_per_chunk`` where ``traits`` has one), written into one output tensor per type (no
    list of chunks to concatenate: half the peak). With ``grow`` (a layer follows), a type whose own rows lead
    its need rows (``p.prefix``) gets its outputs as the first rows of a tensor of all its need rows
    (``p.storage``): the next layer's inputs, the rest read into it."""
    at = p.slot[p.dst_lo : p.dst_hi]
    count = {t: int((p.need_type[at] == ti).sum()) for ti, t in enumerate(p.ntypes)}
    out: dict[str, torch.Tensor] = {}
    filled = dict.fromkeys(p.ntypes, 0)
    for lo, hi in chunks(p, traits.layer_edges_per_chunk or EDGES_PER_CHUNK):
        _, rows = _chunk(model, i, p, x, lo=lo, hi=hi, traits=traits, edge_rows=edge_rows, device=device)
        for t, v in rows.items():
            if t not in out:
                if grow and t in p.prefix and v.dtype == torch.float32:
                    n_need = int((p.need_type == p.ntypes.index(t)).sum())
                    p.storage[t] = torch.empty((n_need, *v.shape[1:]), dtype=v.dtype)
                    out[t] = p.storage[t][: count[t]]
                else:
                    out[t] = torch.empty((count[t], *v.shape[1:]), dtype=v.dtype)
            out[t][filled[t] : filled[t] + v.shape[0]] = v
            filled[t] += v.shape[0]
    return out


def _count_remote(p: Plan, types: Any) -> None:
    """Record the remote rows one layer's inputs of ``types`` read (one bulk read per type)."""
    p.fetched.append(int(p.remote[np.isin(p.need_type, [p.ntypes.index(t) for t in types])].sum()))


def _fetch(p: Plan, read: Callable[[str, torch.Tensor], torch.Tensor], types: Any) -> dict[str, torch.Tensor]:
    """Rows of every needed node of ``types``, per type, in ``need`` order (one bulk read per type)."""
    _count_remote(p, types)
    return {t: read(t, torch.from_numpy(p.of_type(ti))) for ti, t in enumerate(p.ntypes) if t in types}


def layerwise_inference(
    g: DistGraph,
    model: Any,
    inputs: Rows,
    name: str,
    *,
    types: list[str] | None = None,
    layers: int | None = None,
    edge_rows: EdgeRows | None = None,
    device: torch.device | None = None,
) -> tuple[dict[str, DistTensor], list[Plan]]:
    """The output of ``model`` (a :class:`~graphshard.models.contract.LayerwiseModel`: ``layer_inputs``,
    ``layer``, ``num_layers``, and the traits :func:`~graphshard.models.contract.layerwise_traits` reads) for
    every node, as one :class:`DistTensor` per node type in ``types`` (all by default). ``inputs`` gives the
    input rows of any nodes (features, or learnt embeddings); ``edge_rows`` the feature rows of any edges (for
    models that read edge features); ``layers``: stop after that many layers (e.g. ``num_layers - 1`` for the
    hidden representation the last layer reads); ``device``: compute each chunk there (the model's device;
    see :mod:`.on_device`), the tables staying on the host. Also returns the plan of each stored partition
    this rank serves. Collective over ``g``'s group."""
    plans, was_training = [plan(g, part) for part in g.local_graphs], model.training
    for p in plans:
        p.prefix = own_prefix(g, p)
    traits = layerwise_traits(model)
    depth = model.num_layers if layers is None else layers
    model.eval()
    context = now_doing()
    if traits.wants_degrees:
        _count_degrees(g, plans, name)
    edge_rows = edge_rows if traits.uses_edge_attr else None
    with torch.no_grad():
        tables: dict[str, DistTensor] = {}
        rows: list[dict[str, torch.Tensor]]
        for i in range(depth):
            doing(f"{context}: layer-wise inference, layer {i + 1} of {depth}")
            rows = []
            for p in plans:  # one stored partition after another: one's inputs in memory at a time
                x: dict[str, torch.Tensor] | None
                x = _first_inputs(model, p, inputs, device) if i == 0 else _next_inputs(p, tables)
                p.storage = {}  # x holds them now
                grow = i + 1 < depth
                rows.append(_layer(model, i, p, x, traits=traits, edge_rows=edge_rows, grow=grow, device=device))
                x = None
            for table in tables.values():  # every rank has read its inputs: the layer before goes first
                table.free()
            tables = _publish(g, plans, rows, f"{name}/layer{i}")
            rows = []  # held by the new tables from now on
    model.train(was_training)
    doing(context)
    log.info(
        "layer-wise inference %s: remote rows read per layer %s",
        name,
        [sum(f) for f in zip(*(p.fetched for p in plans))],
    )
    keep = {t: v for t, v in tables.items() if types is None or t in types}
    for t, v in tables.items():
        if t not in keep:
            v.free()
    return keep, plans


def _first_inputs(model: Any, p: Plan, inputs: Rows, device: torch.device | None) -> dict[str, torch.Tensor]:
    """The first layer's input rows of every needed node (the model's ``layer_inputs``, on ``device`` if given)."""
    rows = _fetch(p, inputs, p.ntypes)
    return model.layer_inputs(rows) if device is None else inputs_on(model, rows, device)


def _publish(g: DistGraph, plans: list[Plan], rows: list[dict[str, torch.Tensor]], name: str) -> dict[str, DistTensor]:
    """New DistTensors (one per node type) holding every rank's destination ``rows`` (collective)."""
    book = g.get_partition_book()
    width = _agreed_width(g, {t: v for r in rows for t, v in r.items()}, name)
    held = {t: v for p, r in zip(plans, rows) for t, v in r.items() if _in_storage(p, t, v)}  # the shard as it is
    new = {
        t: DistTensor(
            g.group,
            book,
            (g.num_nodes(t), width[t]),
            torch.float32,
            name=f"{name}/{t}#{g.key}",
            ntype=t,
            init=_given(held[t]) if t in held else None,
        )
        for t in plans[0].ntypes
        if t in width
    }
    for p, r in zip(plans, rows):
        for ti, t in enumerate(p.ntypes):
            if t in r and t in new and t not in held:
                new[t][torch.from_numpy(p.need_tid[dst_types(p, ti)])] = r[t].to(torch.float32)
    g.barrier()
    return new


def _given(rows: torch.Tensor) -> Callable[[tuple[int, ...], torch.dtype], torch.Tensor]:
    """A DistTensor ``init`` whose shard is ``rows`` themselves."""
    return lambda shape, dtype: rows


def _in_storage(p: Plan, t: str, rows: torch.Tensor) -> bool:
    """Whether ``rows`` (outputs of type ``t``) are the leading rows of the plan's storage of ``t``."""
    return t in p.storage and rows.data_ptr() == p.storage[t].data_ptr() and rows.shape[0] == p.prefix[t]


def _count_degrees(g: DistGraph, plans: list[Plan], name: str) -> None:
    """Give every plan the in-degree (self-loops not counted, every edge type summed) of each row it reads:
    each rank counts its destinations' stored in-edges and the others' are read back (collective)."""
    rows = [_own_degrees(p) for p in plans]
    tables = _publish(g, plans, rows, f"{name}/degrees")
    for p in plans:
        p.degree = {t: v[:, 0] for t, v in _next_inputs(p, tables, count=False).items()}
    g.barrier()  # every rank has read its rows before they are freed
    for t in tables.values():
        t.free()


def _own_degrees(p: Plan) -> dict[str, torch.Tensor]:
    """In-degrees of this rank's destinations per type (a one-column table, in local order)."""
    lo, hi = p.dst_lo, p.dst_hi
    deg = np.diff(p.indptr[lo : hi + 1]).astype(np.int64)
    for a, b in chunks(p, EDGES_PER_CHUNK):  # minus each node's self-loops, a chunk of edges at a time
        e0, e1 = int(p.indptr[a]), int(p.indptr[b])
        dst = np.repeat(np.arange(a, b), np.diff(p.indptr[a : b + 1]))
        deg -= np.bincount(dst[p.indices[e0:e1] == dst] - lo, minlength=hi - lo)
    at = p.slot[lo:hi]
    return {
        t: torch.from_numpy(deg[p.need_type[at] == ti].astype(np.float32)).view(-1, 1) for ti, t in enumerate(p.ntypes)
    }


READ_BYTES = 64 << 20  # rows read from a layer's tables at a time, in bytes


def _next_inputs(p: Plan, tables: dict[str, DistTensor], count: bool = True) -> dict[str, torch.Tensor]:
    """The next layer's input rows of every needed node, per type, in ``need`` order, read from ``tables`` (this
    rank's own rows where they are, the others from their owners) a block of :data:`READ_BYTES` at a time: the
    rows of the layer before are not kept beside their table, and no second copy of every row is made."""
    if count:
        _count_remote(p, tables)
    x = {}
    for ti, t in enumerate(p.ntypes):
        if t not in tables:
            continue
        ids = p.need_tid[p.need_type == ti]  # in need order: the rows' positions among their type's are 0, 1, ...
        width = int(tables[t].shape[1])
        shard = local_shard(tables[t].name)
        if shard is not None and _in_storage(p, t, shard.rows):
            out, first = p.storage[t], p.prefix[t]  # the own rows are in place: the others follow them
        else:
            out, first = torch.empty((ids.shape[0], width), dtype=torch.float32), 0
        block = max(1, READ_BYTES // (4 * max(1, width)))
        for lo in range(first, ids.shape[0], block):  # a loop over blocks of rows
            out[lo : lo + block] = tables[t][torch.from_numpy(ids[lo : lo + block])]
        x[t] = out
    return x


def _agreed_width(g: DistGraph, rows: dict[str, torch.Tensor], what: str) -> dict[str, int]:
    """The output width of every type that has one on some rank (ranks without rows of a type do not know it)."""
    mine = ",".join(f"{t}={int(v.shape[1])}" for t, v in rows.items())
    width: dict[str, int] = {}
    for text in g.group.all_gather(mine.encode(), what):
        for item in filter(None, text.decode().split(",")):
            t, w = item.rsplit("=", 1)
            width[t] = int(w)
    return width

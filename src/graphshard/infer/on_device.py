"""Layer-wise inference on a device: each chunk of destinations (about :data:`~.plan.EDGES_PER_CHUNK` in-edges)
goes to the device with only the source rows its edges read, is computed there, and its output rows come back
to the host, where the layer's table is. The device holds one chunk at a time, however large the graph: its
rows, edges and temporaries, sized by the chunk, not by the partition.

A chunk's rows are compacted: per node type, the sources its edges read and its own destinations (a model may
read a destination's row among the sources, ``LayerContext.dst_in_src``), in ascending order, and every index
into them (edges, ``dst_in_src``, degrees) renumbered to match. The result equals the host's computation of the
same layer (the same rows in, the same sums, up to the order of floating-point additions)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..graph import EType
from ..models.layer_context import LayerContext

EdgeRows = Callable[[EType, torch.Tensor], torch.Tensor]
ROWS_PER_BLOCK = 1 << 18  # input rows projected on the device at a time (layer_inputs)


def inputs_on(model: Any, rows: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """``model.layer_inputs(rows)`` computed on ``device`` a block of rows at a time (the projections are row by
    row), returned on the host."""
    out: dict[str, torch.Tensor] = {}
    for t, v in rows.items():
        blocks = []
        for lo in range(0, max(1, v.shape[0]), ROWS_PER_BLOCK):
            got = model.layer_inputs({t: v[lo : lo + ROWS_PER_BLOCK].to(device)})
            if t not in got:  # the model takes no input of this type
                break
            blocks.append(got[t].float().cpu())
        if blocks:
            out[t] = torch.cat(blocks) if len(blocks) > 1 else blocks[0]
    return out


def chunk_on(
    model: Any,
    i: int,
    x: dict[str, torch.Tensor],
    dst_pos: dict[str, np.ndarray],
    *,
    edges: dict[EType, tuple[np.ndarray, np.ndarray]],
    context: LayerContext | None,
    device: torch.device,
) -> dict[str, torch.Tensor]:
    """Layer ``i`` of ``model`` for one chunk, on ``device``: ``x`` every needed row per type (host),
    ``dst_pos`` the chunk's destinations' positions among them, ``edges`` per type (source positions among
    ``x``'s rows of the source type, destination positions among the chunk's destinations of the type), and the
    host's ``context`` (None: the model takes none). Returns the output rows per type, on the host."""
    used = _used_rows(x, dst_pos, edges)
    x_src = {t: _to(x[t], keep, device) for t, keep in used.items()}
    x_dst = {t: _to(x[t], pos, device) for t, pos in dst_pos.items() if t in x}
    on_edges = {  # an edge type whose sources have no rows (the model takes no input of that type) as it is
        et: torch.from_numpy(np.stack([np.searchsorted(used[et[0]], src) if et[0] in used else src, dst])).to(device)
        for et, (src, dst) in edges.items()
    }
    if context is None:
        out = model.layer(i, x_src, x_dst, on_edges)
    else:
        out = model.layer(i, x_src, x_dst, on_edges, context=_context_on(context, used, device))
    return {t: v.float().cpu() for t, v in out.items()}


def _used_rows(
    x: dict[str, torch.Tensor], dst_pos: dict[str, np.ndarray], edges: dict[EType, tuple[np.ndarray, np.ndarray]]
) -> dict[str, np.ndarray]:
    """Per type of ``x``: the rows the chunk reads, ascending (edge sources and the chunk's destinations)."""
    parts: dict[str, list[np.ndarray]] = {t: [] for t in x}
    for et, (src, _) in edges.items():
        if et[0] in parts:
            parts[et[0]].append(src)
    for t, pos in dst_pos.items():
        if t in parts:
            parts[t].append(pos)
    return {t: np.unique(np.concatenate(p)) if p else np.zeros(0, np.int64) for t, p in parts.items()}


def _to(rows: torch.Tensor, pos: np.ndarray, device: torch.device) -> torch.Tensor:
    return rows[torch.from_numpy(np.asarray(pos, dtype=np.int64))].to(device)


def _context_on(ctx: LayerContext, used: dict[str, np.ndarray], device: torch.device) -> LayerContext:
    """``ctx`` renumbered for the compacted source rows ``used``, on ``device``."""
    out = LayerContext({})
    for t, pos in ctx.dst_in_src.items():
        out.dst_in_src[t] = torch.from_numpy(np.searchsorted(used[t], pos.numpy())).to(device)
    for t, degree in ctx.src_degree.items():
        out.src_degree[t] = degree[torch.from_numpy(used[t])].to(device)
    for t, degree in ctx.dst_degree.items():
        out.dst_degree[t] = degree.to(device)
    for et, rows in ctx.edge_attr.items():
        out.edge_attr[et] = rows.to(device)
    return out

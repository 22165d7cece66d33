"""One PyG convolution's output rows for a chunk of destinations in layer-wise inference, equal to the rows
the same layer gives over the whole graph.

A chunk has every in-edge of its destinations, but its sources and destinations are separate row sets
whose positions do not line up (:class:`LayerContext` says where each destination's own row is among
the sources). Layers that are bipartite-safe (SAGE, GIN/GINE, Transformer) are called on
``(x_src, x_dst)`` as they are; the others need what the whole graph would give them:

- **GCN** normalises every edge by the in-degrees of *both* its ends (self-loop included), and a source's
  degree is not visible in the chunk: it comes from the context; the sum is one sparse product.
- **GAT/GATv2** add a self-loop to every node and take a softmax over a node's edges: the chunk's own
  self-loops are dropped, the destinations' rows are put in front of the sources' (so destination ``j``
  is node ``j`` of one graph) and the layer runs on that graph as usual; the first rows are kept.
"""

from __future__ import annotations

import torch
from torch_geometric.nn import GATConv, GATv2Conv, GCNConv, GINConv, GINEConv, SAGEConv, TransformerConv

from ..errors import InputError
from .aggregate import sage_rows, weighted_matrix
from .layer_context import LayerContext

ATTENTION = (GATConv, GATv2Conv)
BIPARTITE = (GINConv, GINEConv, TransformerConv)
SUPPORTED = (SAGEConv, GCNConv, *ATTENTION, *BIPARTITE)


def supports(conv: torch.nn.Module) -> bool:
    """Whether :func:`conv_rows` computes this layer's rows exactly."""
    return isinstance(conv, SUPPORTED)


def conv_rows(
    conv: torch.nn.Module,
    t: str,
    x_src: torch.Tensor,
    x_dst: torch.Tensor,
    *,
    edges: torch.Tensor,
    ctx: LayerContext,
    edge_attr: torch.Tensor | None = None,
) -> torch.Tensor:
    """``conv``'s output rows of the destinations (of node type ``t``) of one chunk (no autograd)."""
    if isinstance(conv, SAGEConv):
        return sage_rows(conv, x_src, x_dst, edges)
    if isinstance(conv, GCNConv):
        return gcn_rows(conv, t, x_src, x_dst, edges=edges, ctx=ctx)
    if isinstance(conv, ATTENTION):
        return attention_rows(conv, t, x_src, x_dst, edges=edges, ctx=ctx, edge_attr=edge_attr)
    if isinstance(conv, BIPARTITE):
        extra = {} if edge_attr is None or isinstance(conv, GINConv) else {"edge_attr": edge_attr}
        return conv((x_src, x_dst), edges, **extra)
    raise InputError(
        f"layer-wise inference has no exact rule for {type(conv).__name__} (it knows "
        f"{', '.join(c.__name__ for c in SUPPORTED)})"
    )


def gcn_rows(
    conv: GCNConv, t: str, x_src: torch.Tensor, x_dst: torch.Tensor, *, edges: torch.Tensor, ctx: LayerContext
) -> torch.Tensor:
    """``GCNConv`` over the whole graph, for the chunk's destinations: each edge weighted by
    ``(deg(src) deg(dst))^-1/2`` with degrees counting one self-loop (of weight 2 when ``improved``), the
    self-loop itself weighted ``1 / deg(dst)``."""
    h_src = conv.lin(x_src)
    keep = ctx.without_self_loops(t, edges) if conv.add_self_loops else None
    src, dst = (edges[0], edges[1]) if keep is None else (edges[0][keep], edges[1][keep])
    loop = (2.0 if conv.improved else 1.0) if conv.add_self_loops else 0.0
    if conv.normalize:
        deg_src, deg_dst = (ctx.src_degree[t].to(torch.float32) + loop, ctx.dst_degree[t].to(torch.float32) + loop)
        weight = _inv_sqrt(deg_src)[src] * _inv_sqrt(deg_dst)[dst]
    else:
        weight = torch.ones(src.shape[0], device=src.device)
    out = torch.sparse.mm(weighted_matrix(torch.stack([src, dst]), weight, x_src.shape[0], x_dst.shape[0]), h_src)
    if conv.normalize and conv.add_self_loops:
        out = out + conv.lin(x_dst) * (loop / deg_dst).unsqueeze(1)
    return out + conv.bias if conv.bias is not None else out


def _inv_sqrt(degree: torch.Tensor) -> torch.Tensor:
    """``degree^-1/2``, 0 where the degree is 0 (as PyG's ``gcn_norm``)."""
    return degree.pow(-0.5).masked_fill_(degree == 0, 0.0)


def attention_rows(
    conv: torch.nn.Module,
    t: str,
    x_src: torch.Tensor,
    x_dst: torch.Tensor,
    *,
    edges: torch.Tensor,
    ctx: LayerContext,
    edge_attr: torch.Tensor | None,
) -> torch.Tensor:
    """``GATConv``/``GATv2Conv`` for the chunk's destinations, on one graph of the destinations' rows then
    the sources' (the layer adds the destinations' self-loops itself, as over the whole graph)."""
    n_dst = x_dst.shape[0]
    if conv.add_self_loops:
        keep = ctx.without_self_loops(t, edges)
        edges = edges[:, keep]
        edge_attr = None if edge_attr is None else edge_attr[keep]
    joined = torch.stack([edges[0] + n_dst, edges[1]])
    return conv(torch.cat([x_dst, x_src]), joined, edge_attr)[:n_dst]

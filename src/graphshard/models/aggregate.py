"""Mean aggregation as one sparse (CSR) matrix product, for inference over whole layers and for a
training batch's first layer.

PyG's message passing gathers one source row per edge (an edges × width tensor) and scatters it into the
destinations; over the millions of edges of a layer-wise inference chunk that costs about three times a
CSR sparse-dense product, which reads each source row where it is. In training, the first layer's inputs
need no gradient, so their mean is taken the same way outside autograd; later layers keep PyG's path (it
is faster there once the backward pass through the aggregation counts)."""

from __future__ import annotations

import warnings

import torch
from torch_geometric.nn import SAGEConv


def mean_matrix(edge_index: torch.Tensor, num_src: int, num_dst: int) -> torch.Tensor:
    """The ``num_dst × num_src`` CSR matrix whose row ``d`` averages the sources of the edges into ``d``."""
    deg = torch.bincount(edge_index[1], minlength=num_dst)
    return weighted_matrix(edge_index, (1.0 / deg.clamp(min=1).to(torch.float32))[edge_index[1]], num_src, num_dst)


def weighted_matrix(edge_index: torch.Tensor, weight: torch.Tensor, num_src: int, num_dst: int) -> torch.Tensor:
    """The ``num_dst × num_src`` CSR matrix with ``weight[e]`` at (destination, source) of every edge ``e``
    (edges into one destination summed by the product)."""
    src, dst = edge_index[0], edge_index[1]
    if dst.numel() > 1 and bool((dst[1:] < dst[:-1]).any()):
        order = torch.argsort(dst, stable=True)
        src, dst, weight = src[order], dst[order], weight[order]
    crow = torch.zeros(num_dst + 1, dtype=torch.int64, device=dst.device)
    torch.cumsum(torch.bincount(dst, minlength=num_dst), 0, out=crow[1:])
    with warnings.catch_warnings():  # torch calls its CSR support "beta" once per process
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(
            crow, src.to(torch.int64), weight.to(torch.float32), (num_dst, num_src), check_invariants=False
        )


def _plain(conv: SAGEConv) -> bool:
    return (
        conv.aggr == "mean"
        and not conv.normalize
        and not conv.project
        and conv.root_weight
        and getattr(conv, "lin_r", None) is not None
    )


def sage_rows(conv: SAGEConv, x_src: torch.Tensor, x_dst: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """``conv((x_src, x_dst), edge_index)`` (no autograd) by a CSR product: when the layer narrows
    (``out < in``), sources are projected before they are averaged (the same sum, fewer columns)."""
    if not _plain(conv):
        return conv((x_src, x_dst), edge_index)
    lin = conv.lin_l
    if lin.out_channels >= lin.in_channels:
        return sage_forward(conv, x_src, x_dst, edge_index)
    agg = torch.sparse.mm(mean_matrix(edge_index, x_src.shape[0], x_dst.shape[0]), x_src @ lin.weight.t())
    agg = agg + lin.bias if lin.bias is not None else agg
    return agg + conv.lin_r(x_dst)


def sage_forward(conv: SAGEConv, x_src: torch.Tensor, x_dst: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """``conv((x_src, x_dst), edge_index)``. Where the inputs need no gradient (a model's first layer, or
    any layer without autograd), the mean of the sources is one CSR product outside autograd (nothing to
    differentiate there) and then the layer's two linear maps, whose weights get their gradients as usual:
    PyG's gather-and-scatter would write an edges x width message tensor first. Otherwise PyG's path."""
    if not _plain(conv) or x_src.requires_grad or x_dst.requires_grad or x_src.device.type != "cpu":
        return conv((x_src, x_dst), edge_index)  # on a GPU: PyG's scatter (the CSR build would synchronise)
    # in fp32 under bf16 autocast too (CPU sparse products have no bfloat16): the mean of fp32 inputs
    with torch.no_grad(), torch.autocast(x_src.device.type, enabled=False):
        agg = torch.sparse.mm(mean_matrix(edge_index, x_src.shape[0], x_dst.shape[0]), x_src.float())
    return conv.lin_l(agg) + conv.lin_r(x_dst)

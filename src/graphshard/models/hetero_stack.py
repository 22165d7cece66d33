"""The shape every built-in heterogeneous GNN shares (:class:`HeteroStack`; the homogeneous ones share
:class:`~.stack.ConvStack`): every node type's input projected to ``hidden``, then ``num_layers`` layers over
dictionaries of rows per node type with ReLU + dropout between them, the ``outputs`` types returned; trimming
a batch by sampled hop; layer-wise inference one layer at a time (the :class:`~.contract.LayerwiseModel`
contract). Only what the ``outputs`` types depend on is built, from the last layer back (:func:`plan`), so
every parameter takes part in every step and DDP needs no search for unused ones.

Also what the models' layers share: a PyG ``HeteroConv``'s convs by relation (:func:`relations`), input
projection of sparse rows (:func:`project`) and a layer-wise chunk's sources compacted (:func:`compact`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, cast

import torch
import torch.nn.functional as F
from torch import nn

from ..graph import EType
from .contract import LayerwiseModel
from .dropout import relu_dropout

Hops = tuple[dict[str, list[int]], dict[EType, list[int]]]


class Relations(Protocol):
    """A PyG ``HeteroConv``'s ``convs``: its conv of every relation, keyed by edge type (PyG's ``ModuleDict``
    takes tuple keys)."""

    def keys(self) -> Iterable[EType]: ...

    def __getitem__(self, et: EType, /) -> nn.Module: ...

    def __contains__(self, et: object, /) -> bool: ...


def relations(conv: nn.Module) -> Relations:
    """The per-relation convs of ``conv``, a PyG ``HeteroConv``."""
    return cast(Relations, conv.convs)  # HeteroConv.convs (PyG is untyped; torch says Tensor | Module)


def project(lin: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``lin(x)``, also for a sparse COO ``x`` (bag-of-words rows: only their non-zeros are multiplied)."""
    if x.is_sparse:
        return torch.sparse.mm(x, lin.weight.t()) + lin.bias
    return lin(x)


def plan(
    etypes: list[EType], outputs: list[str], num_layers: int
) -> tuple[list[tuple[list[EType], list[str]]], set[str]]:
    """Per layer, first to last: the relations it builds (those into the types it writes) and the types it
    writes (the outputs for the last layer, the types the next layer reads before it); and the types the
    first layer reads (the only ones to project). Built from the last layer back."""
    layers, types = [], set(outputs)
    for _ in range(num_layers):
        rels = [et for et in etypes if et[2] in types]
        layers.append((rels, sorted(types)))
        types = types | {et[0] for et in rels}
    layers.reverse()
    return layers, types


def usable_hops(hops: Hops | None, depth: int) -> Hops | None:
    """``hops`` if it was sampled for ``depth`` layers (it then tells what to trim), else None."""
    if hops is not None and any(len(n) != depth + 1 for n in hops[0].values()):
        return None
    return hops


def hop_rows(
    hops: Hops | None,
    i: int,
    depth: int,
    x: dict[str, torch.Tensor],
    *,
    edge_index_dict: dict[EType, torch.Tensor],
    rels: Iterable[EType],
) -> tuple[dict[str, int], dict[EType, torch.Tensor]]:
    """Layer ``i``'s destination rows per type (the first ones of ``x[t]``) and its edges: all of them
    without ``hops``; else hops ``0 .. depth-1-i`` of nodes and all but the last ``i`` hops of edges (those
    into the nodes kept), in a batch ordered by hop."""
    if hops is None:
        return {t: v.shape[0] for t, v in x.items()}, {et: edge_index_dict[et] for et in rels}
    nodes, edges = hops
    rows = {t: sum(nodes.get(t, [])[: depth - i]) for t in x}
    kept = {et: sum(edges.get(et, [])[: len(edges.get(et, [])) - i]) for et in rels}
    return rows, {et: edge_index_dict[et][:, : kept[et]] for et in kept}


def compact(
    x_src: dict[str, torch.Tensor], edges: dict[EType, torch.Tensor]
) -> tuple[dict[str, torch.Tensor], dict[EType, torch.Tensor]]:
    """The source rows ``edges`` read, each once, per type (none of the types they do not read), and the
    edges renumbered to them: a layer-wise chunk then transforms its own sources only, not every row its
    rank holds (GATConv and HGTConv transform all the source rows they are given)."""
    rows = {t: v[:0] for t, v in x_src.items()}
    out: dict[EType, torch.Tensor] = {}
    for t in {et[0] for et in edges}:
        ets = [et for et in edges if et[0] == t]
        used, at = torch.unique(torch.cat([edges[et][0] for et in ets]), return_inverse=True)
        rows[t] = x_src[t][used]
        for et, src in zip(ets, at.split([edges[et].shape[1] for et in ets])):
            out[et] = torch.stack([src, edges[et][1]])
    return rows, out


class HeteroStack(nn.Module):
    """``forward(x_dict, edge_index_dict, hops=None)`` wants every node and edge type present (empty where a
    batch has none — see :class:`graphshard.tasks.inputs.ModelInputs`) and returns the ``outputs`` types (all
    by default). With ``hops = (num_sampled_nodes per type, num_sampled_edges per edge type)`` of a batch
    ordered by hop, layer ``i`` computes rows only for the nodes later layers need (hops ``0 .. L-1-i`` of
    each type) from the edges into them, and the output has rows for the seeds only, equal to the untrimmed
    ones.

    This base projects the input types the layers read (``proj``, built first: the parameters' order, and so
    their initial values for a seed, is the models' own) and holds :func:`plan`'s layers in ``layer_plan``
    for a subclass to build its layers from. A subclass gives :meth:`relations_of`, :meth:`step` (a layer in
    ``forward``) and :meth:`chunk_step` (a layer in layer-wise inference)."""

    # the layer-wise contract (graphshard.models.contract.LayerwiseModel)
    layerwise = True
    layer_context = False  # the layers read rows and edges only
    wants_degrees = False
    uses_edge_attr = False
    layer_edges_per_chunk: int | None = None  # the planner's chunk

    def __init__(
        self,
        in_dims: dict[str, int],
        etypes: list[EType],
        hidden: int,
        *,
        num_layers: int,
        dropout: float,
        outputs: list[str] | None,
    ):
        super().__init__()
        self.outputs = list(in_dims) if outputs is None else list(outputs)
        self.layer_plan, inputs = plan(etypes, self.outputs, num_layers)
        self.proj = nn.ModuleDict({t: nn.Linear(d, hidden) for t, d in in_dims.items() if t in inputs})
        self.dropout = dropout

    def relations_of(self, i: int) -> Iterable[EType]:
        """The edge types layer ``i`` reads (``forward`` gives it those edges only)."""
        raise NotImplementedError

    def step(
        self, i: int, x: dict[str, torch.Tensor], edges: dict[EType, torch.Tensor], rows: dict[str, int]
    ) -> dict[str, torch.Tensor]:
        """Layer ``i`` before its activation, in ``forward``: for the first ``rows[t]`` rows of each ``x[t]``
        (the destinations; ``x`` holds sources and destinations in one index space per type)."""
        raise NotImplementedError

    def chunk_step(
        self, i: int, x_src: dict[str, torch.Tensor], x_dst: dict[str, torch.Tensor], edges: dict[EType, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Layer ``i`` before its activation, in layer-wise inference: for the rows of ``x_dst``, which are
        not aligned with the sources ``x_src`` (see :meth:`layer`)."""
        raise NotImplementedError

    def forward(
        self, x_dict: dict[str, torch.Tensor], edge_index_dict: dict[EType, torch.Tensor], hops: Hops | None = None
    ) -> dict[str, torch.Tensor]:
        """The ``outputs`` types' rows: all of them, or the seeds' only with ``hops`` (equal either way)."""
        x = self.layer_inputs({t: x_dict[t] for t in self.proj})
        depth = self.num_layers
        hops = usable_hops(hops, depth)
        for i in range(depth):
            rows, edges = hop_rows(hops, i, depth, x, edge_index_dict=edge_index_dict, rels=self.relations_of(i))
            x = self.step(i, x, edges, rows)
            if i < depth - 1:
                x = {t: relu_dropout(v, self.dropout, self.training) for t, v in x.items()}
        return {t: x[t] for t in self.outputs}

    # Layer-wise inference (see graphshard.infer): one layer at a time over (sources, destinations, edges).
    @property
    def num_layers(self) -> int:
        return len(self.layer_plan)

    def layer_inputs(self, x: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {t: project(cast(nn.Linear, self.proj[t]), v) for t, v in x.items() if t in self.proj}  # Linear layers

    def layer(
        self, i: int, x_src: dict[str, torch.Tensor], x_dst: dict[str, torch.Tensor], edges: dict[EType, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Layer ``i`` (activated but the last) for the rows of ``x_dst`` of every type: ``edges[et]`` holds
        positions into ``x_src[et[0]]`` and ``x_dst[et[2]]`` (see :class:`~.contract.LayerwiseModel`)."""
        out = self.chunk_step(i, x_src, x_dst, edges)
        return {t: F.relu(v) for t, v in out.items()} if i < self.num_layers - 1 else out


_MEETS_CONTRACT: type[LayerwiseModel] = HeteroStack  # mypy checks that HeteroStack meets the layer-wise contract

"""The user's own model: ``--model package.module:factory``.

The factory is called with one :class:`~.spec.ModelSpec` (input and output widths, node and edge types,
the run's options) and returns a ``torch.nn.Module`` that maps a loader batch to one output row per node
of the batch, as PyG's models do (the loss reads the seeds' rows, the first ``batch_size``). It is called
the way PyG's models are: ``module(x, edge_index)`` on a homogeneous graph (``edge_attr=`` too when its
``forward`` takes it and the run has edge features), ``module(x_dict, edge_index_dict)`` on a
heterogeneous one (returning a dictionary with the output types), or ``module(batch)`` when ``forward``
takes one argument (a ``Data``/``HeteroData`` whose ``x`` holds the model's inputs).

Layer-wise inference (exact, O(layers × edges)) runs for a module that meets the contract of the built-in
models, :class:`~.contract.LayerwiseModel`: ``num_layers`` and ``layer(i, x_src, x_dst, edges[, context])``
at least (``layer_inputs`` is the identity where it has none; the traits it does not declare are read at
their defaults by :func:`~.contract.layerwise_traits`), and for PyG's own ``BasicGNN`` models
(``torch_geometric.nn.GCN``, ``GAT``, ``GraphSAGE``, ``GIN``, ...) without jumping knowledge or per-graph
normalisation. Any other model is evaluated on every node's sampled full neighbourhood instead."""

from __future__ import annotations

import inspect
from typing import Any, cast

import torch
from torch import nn
from torch_geometric.data import Data, HeteroData
from torch_geometric.nn.models.basic_gnn import BasicGNN

from ..errors import InputError
from .contract import LayerwiseModel, layerwise_traits
from .conv_rows import conv_rows, supports
from .layer_context import LayerContext
from .registry import load_factory
from .spec import ModelSpec

ROW_NORMS = (nn.Identity, nn.BatchNorm1d)  # normalisations of each row on its own (in eval mode)


def build_custom(name: str, spec: ModelSpec) -> CustomModel:
    """The user's module from factory ``name``, wrapped for graphshard's training and inference."""
    try:
        module = load_factory(name)(spec)
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"--model {name}: the factory raised {type(exc).__name__}: {exc}") from None
    if not isinstance(module, nn.Module):
        raise InputError(f"--model {name}: the factory returned a {type(module).__name__}, not a torch.nn.Module")
    if not any(p.requires_grad for p in module.parameters()):
        raise InputError(f"--model {name}: the model has no trainable parameters")
    return CustomModel(module, name, spec)


def _offered(module: nn.Module) -> LayerwiseModel:
    """``module`` as the contract it meets: duck-typed (torch types a module's own attributes Tensor | Module)."""
    return cast(LayerwiseModel, module)


def _parameters(module: nn.Module) -> list[str]:
    return list(inspect.signature(module.forward).parameters)


class CustomModel(nn.Module):
    """Calls the user's ``module`` with graphshard's ``(x, edge_index, hops, edge_attr)`` the way it takes
    its inputs (see the module docstring) and offers layer-wise inference where the module allows it: its
    traits are those the module declares (:func:`~.contract.layerwise_traits`), a ``BasicGNN``'s set here."""

    def __init__(self, module: nn.Module, name: str, spec: ModelSpec):
        super().__init__()
        self.module, self.name, self.hetero = module, name, spec.hetero
        params = _parameters(module)
        self.batch_form = len(params) == 1
        self.takes_edge_attr = "edge_attr" in params
        traits, basic = layerwise_traits(module), isinstance(module, BasicGNN)
        self.layer_context = basic or traits.layer_context
        self.wants_degrees = basic or traits.wants_degrees  # GCN layers
        self.uses_edge_attr = self.takes_edge_attr or traits.uses_edge_attr
        self.layer_edges_per_chunk = traits.layer_edges_per_chunk
        self.layerwise = _basic_gnn_fits(module) or (traits.layerwise and traits.num_layers is not None)
        self._module_context = traits.layer_context  # the module's own layer takes a context

    def forward(self, x: Any, edge_index: Any, hops: Any = None, edge_attr: Any = None) -> Any:
        if self.batch_form:
            return self.module(_batch(x, edge_index, edge_attr, self.hetero))
        if self.takes_edge_attr and edge_attr is not None:
            return self.module(x, edge_index, edge_attr=edge_attr)
        return self.module(x, edge_index)

    @property
    def num_layers(self) -> int:
        return int(_offered(self.module).num_layers)

    def layer_inputs(self, x: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return _offered(self.module).layer_inputs(x) if hasattr(self.module, "layer_inputs") else x

    def layer(self, i: int, x_src: dict, x_dst: dict, edges: dict, *, context: LayerContext | None = None) -> dict:
        if not isinstance(self.module, BasicGNN):
            if self._module_context:
                return _offered(self.module).layer(i, x_src, x_dst, edges, context=context)
            return _offered(self.module).layer(i, x_src, x_dst, edges)
        assert context is not None  # layer_context is set for a BasicGNN: layer-wise inference passes one
        (t,) = x_dst
        et = next(iter(edges), None)
        ei = edges[et] if et is not None else torch.zeros((2, 0), dtype=torch.long, device=x_dst[t].device)
        attr = context.edge_attr.get(et) if et is not None else None
        conv = self.module.convs[i]
        out = conv_rows(
            conv,
            t,
            x_src[t],
            x_dst[t],
            edges=ei,
            ctx=context,
            edge_attr=attr if self.module.supports_edge_attr else None,
        )
        return {t: _between_layers(self.module, i, out)}


_MEETS_CONTRACT: type[LayerwiseModel] = CustomModel  # mypy checks that CustomModel meets the layer-wise contract


def _basic_gnn_fits(module: nn.Module) -> bool:
    """A PyG ``BasicGNN`` whose layers have exact layer-wise rules and nothing across rows between them."""
    return (
        isinstance(module, BasicGNN)
        and module.jk_mode is None
        and not hasattr(module, "lin")
        and all(supports(c) for c in module.convs)
        and all(isinstance(n, ROW_NORMS) for n in module.norms)
    )


def _between_layers(module: BasicGNN, i: int, x: torch.Tensor) -> torch.Tensor:
    """What ``BasicGNN.forward`` applies after layer ``i`` in eval mode (activation and normalisation)."""
    if i == module.num_layers - 1:
        return x
    if module.act is not None and module.act_first:
        x = module.act(x)
    x = module.norms[i](x)
    if module.act is not None and not module.act_first:
        x = module.act(x)
    return x


def _batch(x: Any, edge_index: Any, edge_attr: Any, hetero: bool) -> Data | HeteroData:
    """A PyG batch of the model's inputs for a ``forward(batch)`` module."""
    if not hetero:
        return Data(x=x, edge_index=edge_index, edge_attr=edge_attr, num_nodes=x.shape[0])
    data = HeteroData()
    for t, v in x.items():
        data[t].x = v
    for et, ei in edge_index.items():
        data[et].edge_index = ei
        if isinstance(edge_attr, dict) and et in edge_attr:
            data[et].edge_attr = edge_attr[et]
    return data

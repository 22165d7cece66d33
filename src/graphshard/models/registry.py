"""The models ``--model`` names: the built-in ones, for homogeneous and heterogeneous graphs, and the
user's own, named ``package.module:factory`` (see :mod:`.custom`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from ..errors import InputError
from .gat import GAT
from .gcn import GCN
from .gin import GIN
from .hetero import HeteroSAGE
from .hgt import HGT
from .mlp import MLP
from .rgat import RGAT
from .rgcn import RGCN
from .sage import GraphSAGE
from .spec import ModelSpec

Factory = Callable[[ModelSpec], nn.Module]
FACTORY_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


def _sage(spec: ModelSpec) -> nn.Module:
    return GraphSAGE(spec.in_dim, spec.hidden, spec.out_dim, spec.num_layers, spec.dropout)


def _rsage(spec: ModelSpec) -> nn.Module:
    return HeteroSAGE(spec.in_dims, spec.etypes, spec.hidden, spec.out_dim, spec.num_layers, spec.dropout,
                      spec.outputs)


def _mlp(spec: ModelSpec) -> nn.Module:
    if len(set(spec.outputs)) > 1:
        raise InputError(f"model 'mlp' maps one node type, not {spec.outputs}")
    return MLP(spec.in_dim, spec.hidden, spec.out_dim, spec.num_layers, spec.dropout,
               spec.target if spec.hetero else None)


@dataclass(frozen=True)
class Builtin:
    """A built-in model: how it is built on a homogeneous and on a heterogeneous graph (None: it is not
    made for that kind), whether it reads edge features, and whether its first step is a projection of
    every node type's input (so CSR features can reach it as sparse batches)."""

    homogeneous: Factory | None
    heterogeneous: Factory | None
    help: str
    edge_features: bool = False
    projects_inputs: bool = False


BUILTIN: dict[str, Builtin] = {
    "sage": Builtin(_sage, _rsage, "GraphSAGE, mean aggregation (on a heterogeneous graph: rsage)",
                    projects_inputs=True),
    "gcn": Builtin(GCN.from_spec, None, "GCN (symmetric normalisation)"),
    "gat": Builtin(GAT.from_spec, None, "GAT (--heads, --attn-dropout; reads --edge-feat)",
                   edge_features=True),
    "gin": Builtin(GIN.from_spec, None, "GIN (GINE with --edge-feat)", edge_features=True),
    "mlp": Builtin(_mlp, _mlp, "features-only baseline (ignores the edges)"),
    "rsage": Builtin(None, _rsage, "relational GraphSAGE (one SAGEConv per edge type, averaged into "
                     "each node type)", projects_inputs=True),
    "rgcn": Builtin(None, RGCN.from_spec, "relational GCN (a mean per edge type, averaged over the types, plus "
                    "a root term)",
                    projects_inputs=True),
    "rgat": Builtin(None, RGAT.from_spec, "relational GAT (one GATConv per edge type, averaged; --heads)",
                    projects_inputs=True),
    "hgt": Builtin(None, HGT.from_spec, "heterogeneous graph transformer (PyG's HGTConv; --heads)",
                   projects_inputs=True),
}


def is_custom(name: str) -> bool:
    """Whether ``name`` names the user's factory (``package.module:factory``) rather than a built-in."""
    return ":" in name


def check_name(name: str) -> None:
    """:class:`InputError` unless ``name`` is a built-in model or reads ``package.module:factory``."""
    if name in BUILTIN or FACTORY_NAME.fullmatch(name):
        return
    raise InputError(f"unknown model {name!r}: give one of {', '.join(BUILTIN)}, or your own factory as "
                     "package.module:function")


def builtin_for(name: str, hetero: bool) -> Factory:
    """The factory of built-in ``name`` for a homogeneous or heterogeneous graph; :class:`InputError`
    naming the models that fit when this one does not."""
    entry = BUILTIN[name]
    factory = entry.heterogeneous if hetero else entry.homogeneous
    if factory is None:
        kind = "heterogeneous" if hetero else "homogeneous"
        fits = [n for n, b in BUILTIN.items() if (b.heterogeneous if hetero else b.homogeneous) is not None]
        raise InputError(f"model {name!r} is not made for a {kind} graph (this graph is; models for it: "
                         f"{', '.join(fits)})")
    return factory


def projects_inputs(name: str, hetero: bool) -> bool:
    """Whether the model first projects each node type's inputs (sparse CSR features may reach it)."""
    return hetero and name in BUILTIN and BUILTIN[name].projects_inputs


def reads_edge_features(name: str) -> bool:
    """Whether the model reads the run's edge features (the user's own model may: it is given them)."""
    return is_custom(name) or (name in BUILTIN and BUILTIN[name].edge_features)


def model_help() -> str:
    """One line per built-in model, for ``--help``."""
    return "; ".join(f"{n}: {b.help}" for n, b in BUILTIN.items())

"""The models ``--model`` names: the built-in ones, for homogeneous and heterogeneous graphs, and the
user's own, named ``package.module:factory`` (see :mod:`.custom`)."""

from __future__ import annotations

import difflib
import importlib
import os
import re
import sys
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any

from torch import nn

from ..errors import InputError
from .spec import ModelSpec

EDGE_DECODERS = ("concat", "dot", "distmult")  # how an edge task scores a labelled edge (models.edge)

Factory = Callable[[ModelSpec], nn.Module]
FACTORY_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


@dataclass(frozen=True)
class Builtin:
    """A built-in model: the class (``module:Class`` in :mod:`graphshard.models`, built by its ``from_spec``)
    on a homogeneous and on a heterogeneous graph (None: it is not made for that kind), whether it reads
    edge features, and whether its first step is a projection of every node type's input (so CSR features
    can reach it as sparse batches). Classes are named, not imported: every command line reads these names,
    only training imports PyG's layers."""

    homogeneous: str | None
    heterogeneous: str | None
    help: str
    edge_features: bool = False
    _: KW_ONLY
    projects_inputs: bool = False


BUILTIN: dict[str, Builtin] = {
    "sage": Builtin(
        "sage:GraphSAGE",
        "hetero:HeteroSAGE",
        "GraphSAGE, mean aggregation (on a heterogeneous graph: rsage)",
        projects_inputs=True,
    ),
    "gcn": Builtin("gcn:GCN", None, "GCN (symmetric normalisation)"),
    "gat": Builtin("gat:GAT", None, "GAT (--heads, --attn-dropout; reads --edge-feat)", edge_features=True),
    "gin": Builtin("gin:GIN", None, "GIN (GINE with --edge-feat)", edge_features=True),
    "mlp": Builtin("mlp:MLP", "mlp:MLP", "features-only baseline (ignores the edges)"),
    "rsage": Builtin(
        None,
        "hetero:HeteroSAGE",
        "relational GraphSAGE (one SAGEConv per edge type, averaged into each node type)",
        projects_inputs=True,
    ),
    "rgcn": Builtin(
        None,
        "rgcn:RGCN",
        "relational GCN (a mean per edge type, averaged over the types, plus a root term)",
        projects_inputs=True,
    ),
    "rgat": Builtin(
        None, "rgat:RGAT", "relational GAT (one GATConv per edge type, averaged; --heads)", projects_inputs=True
    ),
    "hgt": Builtin(None, "hgt:HGT", "heterogeneous graph transformer (PyG's HGTConv; --heads)", projects_inputs=True),
}


def load_factory(name: str) -> Any:
    """The callable ``package.module:factory`` names; :class:`InputError` naming it when it cannot be had.

    The module is looked for where ``python -m`` would look, the working directory first: the installed
    ``graphshard`` command (whose ``sys.path`` starts at its own script's directory) finds a ``my_models.py``
    beside the user as ``python -m graphshard.cli`` does."""
    module_name, _, attr = name.partition(":")
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any failure of the user's import is reported, not raised
        raise InputError(f"--model {name}: cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise InputError(f"--model {name}: {module_name} has no function {attr!r}")
    return factory


def is_custom(name: str) -> bool:
    """Whether ``name`` names the user's factory (``package.module:factory``) rather than a built-in."""
    return ":" in name


def check_name(name: str) -> None:
    """:class:`InputError` unless ``name`` is a built-in model or reads ``package.module:factory``."""
    if name in BUILTIN or FACTORY_NAME.fullmatch(name):
        return
    close = difflib.get_close_matches(name.lower(), list(BUILTIN), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise InputError(
        f"unknown model {name!r}{hint}: give one of {', '.join(BUILTIN)}, or your own factory as "
        "package.module:function"
    )


def check_kind(name: str, hetero: bool) -> None:
    """:class:`InputError` naming the models that fit unless built-in ``name`` is made for a homogeneous
    (``hetero`` False) or heterogeneous graph."""
    entry = BUILTIN[name]
    if (entry.heterogeneous if hetero else entry.homogeneous) is None:
        kind = "heterogeneous" if hetero else "homogeneous"
        fits = [n for n, b in BUILTIN.items() if (b.heterogeneous if hetero else b.homogeneous) is not None]
        raise InputError(
            f"model {name!r} is not made for a {kind} graph (this graph is; models for it: {', '.join(fits)})"
        )


def builtin_for(name: str, hetero: bool) -> Factory:
    """The factory (the class's ``from_spec``) of built-in ``name`` for a homogeneous or heterogeneous graph
    (see :func:`check_kind`)."""
    check_kind(name, hetero)
    entry = BUILTIN[name]
    path = entry.heterogeneous if hetero else entry.homogeneous
    assert path is not None  # check_kind raised otherwise
    module, _, cls = path.partition(":")
    return getattr(importlib.import_module(f"graphshard.models.{module}"), cls).from_spec


def projects_inputs(name: str, hetero: bool) -> bool:
    """Whether the model first projects each node type's inputs (sparse CSR features may reach it)."""
    return hetero and name in BUILTIN and BUILTIN[name].projects_inputs


def reads_edge_features(name: str) -> bool:
    """Whether the model reads the run's edge features (the user's own model may: it is given them)."""
    return is_custom(name) or (name in BUILTIN and BUILTIN[name].edge_features)


def model_help() -> str:
    """One line per built-in model, for ``--help``."""
    return "; ".join(f"{n}: {b.help}" for n, b in BUILTIN.items())

"""A graph with its learning task: what every dataset reader and generator returns."""

from __future__ import annotations

from dataclasses import dataclass

from ..graph import DEFAULT_NTYPE, Graph


@dataclass
class Dataset:
    """A graph with its learning task: ``target_ntype`` carries ``label`` and the split masks."""

    name: str
    graph: Graph
    num_classes: int | None
    target_ntype: str = DEFAULT_NTYPE

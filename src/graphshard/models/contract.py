"""The public contract of a model that layer-wise inference computes (:mod:`graphshard.infer.layerwise`), and
the one reader of what a model declares of it (:func:`layerwise_traits`), which holds every default.

Every built-in model meets :class:`LayerwiseModel` and declares each of its attributes. The user's own model
(``--model package.module:factory``, :mod:`.custom`) may declare any of them: those it leaves out are read at
their defaults, so a model that only has ``num_layers``, ``layer_inputs`` and ``layer`` gets layer-wise
inference without a :class:`~.layer_context.LayerContext`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class LayerwiseModel(Protocol):
    """A model whose output for every node is computed one layer at a time over the whole graph: exact, and
    O(layers × edges). Layer-wise inference (``graphshard.infer.layerwise_inference``) calls
    ``layer_inputs`` once on every node's input rows, then ``layer(i, ...)`` for ``i`` in
    ``range(num_layers)`` on chunks of destination nodes; ``train``'s evaluation and ``--save-embeddings``,
    ``graphshard embed`` and ``graphshard serve`` read the traits below through :func:`layerwise_traits`.

    ``isinstance(model, LayerwiseModel)`` holds for a model that declares every member (the built-in ones
    do); a model may leave out any attribute, which is then read at its default.

    Attributes:
        layerwise: Whether layer-wise inference may compute the model (default: whether it has ``layer``).
            False sends evaluation and embeddings to sampled full neighbourhoods (by mini-batches).
        layer_context: Whether ``layer`` takes a fifth, keyword argument ``context``, a
            :class:`~.layer_context.LayerContext` (default False). Read by layer-wise inference.
        wants_degrees: Whether that context holds the nodes' in-degrees over the whole graph (default
            False; GCN-style normalisation reads the sources' degrees). Read by layer-wise inference, which
            then counts them first, and by ``serve``, which then samples one hop more of every in-edge.
        uses_edge_attr: Whether that context holds the chunk's edge features, with ``--edge-feat`` (default
            False). Read by layer-wise inference.
        layer_edges_per_chunk: About how many in-edges one ``layer`` call gets (default None: the planner's
            ``EDGES_PER_CHUNK``); smaller for a layer that writes much per edge (GAT: heads × channels).
            Read by layer-wise inference.
    """

    # read-only: a class attribute, an instance attribute or a property meets each
    @property
    def layerwise(self) -> bool: ...

    @property
    def layer_context(self) -> bool: ...

    @property
    def wants_degrees(self) -> bool: ...

    @property
    def uses_edge_attr(self) -> bool: ...

    @property
    def layer_edges_per_chunk(self) -> int | None: ...

    @property
    def num_layers(self) -> int:
        """The number of message-passing layers (no default: a model without it has no layer-wise inference).
        Read by layer-wise inference and, less one, by ``--embedding-layer hidden``."""
        ...

    def layer_inputs(self, x: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """What runs before the first layer (an input projection, or nothing), on input rows per node type.

        Args:
            x: Input rows (features, or learnt embeddings) of some nodes, per node type.

        Returns:
            The first layer's input rows of the same nodes, per node type (a type the model takes no input of
            may be left out).
        """
        ...

    @property
    def layer(self) -> Callable[..., dict[str, torch.Tensor]]:
        """Layer ``i`` with what runs after it (activation, normalisation; no dropout: the model is in eval
        mode) for one chunk of destinations: called as ``layer(i, x_src, x_dst, edges)``, and with
        ``context=`` a :class:`~.layer_context.LayerContext` when ``layer_context`` is set.

        Args:
            i: The layer, from 0.
            x_src: Per node type, the rows of every node the chunk reads (``dict[str, Tensor]``).
            x_dst: Per node type, the chunk's destinations' rows; not aligned with ``x_src`` (a destination's
                own row among the sources is ``context.dst_in_src``).
            edges: Per canonical edge type, a ``(2, E)`` tensor of positions into ``x_src[et[0]]`` (row 0)
                and ``x_dst[et[2]]`` (row 1): *every* in-edge of each destination.
            context: Keyword, given only to a model with ``layer_context``.

        Returns:
            The output rows of the destinations, per node type, in ``x_dst``'s order.
        """
        ...


@dataclass(frozen=True)
class LayerwiseTraits:
    """What a model declares of :class:`LayerwiseModel`, every attribute it leaves out at its default (see
    there); ``num_layers`` is None where the model has none."""

    layerwise: bool
    num_layers: int | None
    layer_context: bool = False
    wants_degrees: bool = False
    _: KW_ONLY
    uses_edge_attr: bool = False
    layer_edges_per_chunk: int | None = None


def layerwise_traits(model: object) -> LayerwiseTraits:
    """The traits ``model`` declares, at their documented defaults where it declares none: the only reader of
    the contract's attributes, so that the defaults live here.

    Args:
        model: Any model: a built-in one, the user's (wrapped or not), or a plain ``torch.nn.Module``.

    Returns:
        Its :class:`LayerwiseTraits`.
    """
    num_layers = getattr(model, "num_layers", None)  # a property that raises AttributeError: none
    return LayerwiseTraits(
        bool(getattr(model, "layerwise", hasattr(model, "layer"))),
        None if num_layers is None else int(num_layers),
        bool(getattr(model, "layer_context", False)),
        bool(getattr(model, "wants_degrees", False)),
        uses_edge_attr=bool(getattr(model, "uses_edge_attr", False)),
        layer_edges_per_chunk=getattr(model, "layer_edges_per_chunk", None),
    )

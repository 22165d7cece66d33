"""The layer-wise contract (graphshard.models.contract): every built-in model meets it and declares each trait,
a model that declares nothing is read at the documented defaults, and what a user's model declares is read
as declared, by the traits reader and through the wrapper of users' models."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
import torch
from torch import nn

from graphshard.models import LayerwiseModel
from graphshard.models.contract import LayerwiseTraits, layerwise_traits
from graphshard.models.custom import CustomModel
from graphshard.models.hetero_stack import HeteroStack
from graphshard.models.layer_context import LayerContext
from graphshard.models.registry import BUILTIN, builtin_for
from graphshard.models.spec import ModelSpec
from graphshard.models.stack import ConvStack

TRAITS = ("layerwise", "layer_context", "wants_degrees", "uses_edge_attr", "layer_edges_per_chunk")
HOMOGENEOUS = ModelSpec({"_N": 5}, 3, ["_N"], [("_N", "_E", "_N")], outputs=["_N"], hidden=8, num_layers=3)
HETERO = ModelSpec(
    {"a": 5, "b": 3}, 3, ["a", "b"], [("a", "ab", "b"), ("b", "ba", "a")], outputs=["a"], hidden=8, num_layers=3
)
BUILT = [(n, False) for n, b in BUILTIN.items() if b.homogeneous] + [
    (n, True) for n, b in BUILTIN.items() if b.heterogeneous
]


def _built(name: str, hetero: bool) -> nn.Module:
    torch.manual_seed(0)
    return builtin_for(name, hetero)(HETERO if hetero else HOMOGENEOUS)


@pytest.mark.parametrize(("name", "hetero"), BUILT, ids=[f"{n}-{'hetero' if h else 'homo'}" for n, h in BUILT])
def test_every_builtin_model_meets_the_contract_and_declares_every_trait(name, hetero):
    model = _built(name, hetero)
    assert isinstance(model, LayerwiseModel)
    undeclared = [t for t in TRAITS if not any(t in vars(c) for c in type(model).__mro__ if c is not object)]
    assert undeclared == []
    traits = layerwise_traits(model)
    assert traits.layerwise and traits.num_layers == 3
    assert (traits.layer_context, traits.wants_degrees) == (model.layer_context, model.wants_degrees)


def test_the_builtin_stacks_declare_what_they_need():
    gcn, gat, sage = (_built(n, False) for n in ("gcn", "gat", "sage"))
    assert isinstance(gcn, ConvStack) and layerwise_traits(gcn).wants_degrees
    assert layerwise_traits(gat).layer_edges_per_chunk == 1 << 19
    assert layerwise_traits(sage) == LayerwiseTraits(True, 3, True, False)
    gine = builtin_for("gin", False)(
        ModelSpec({"_N": 5}, 3, ["_N"], [("_N", "_E", "_N")], outputs=["_N"], edge_dims={("_N", "_E", "_N"): 2})
    )
    assert layerwise_traits(gine).uses_edge_attr and not layerwise_traits(_built("gin", False)).uses_edge_attr
    for name in ("rsage", "rgcn", "rgat", "hgt"):
        model = _built(name, True)
        assert isinstance(model, HeteroStack)
        assert layerwise_traits(model) == LayerwiseTraits(True, 3, False, False)


def test_a_plain_module_is_read_at_the_documented_defaults():
    plain = nn.Linear(2, 2)
    assert not isinstance(plain, LayerwiseModel)
    traits = layerwise_traits(plain)
    assert traits == LayerwiseTraits(False, None)
    assert (traits.layer_context, traits.wants_degrees, traits.uses_edge_attr) == (False, False, False)
    assert traits.layer_edges_per_chunk is None


def test_the_traits_and_the_protocol_name_the_same_attributes():
    members = {n for n in vars(LayerwiseModel) if not n.startswith("_")}
    assert members == {*TRAITS, "num_layers", "layer_inputs", "layer"}
    assert {f.name for f in fields(LayerwiseTraits)} == {*TRAITS, "num_layers"}


class _Declaring(nn.Module):
    """A user's model offering layer-wise inference, declaring some traits and leaving the others out."""

    wants_degrees = True
    layer_context = True
    layer_edges_per_chunk = 1000

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.seen: list[LayerContext | None] = []

    @property
    def num_layers(self) -> int:
        return 1

    def forward(self, x, edge_index):
        return self.lin(x)

    def layer(self, i, x_src, x_dst, edges, *, context=None):
        self.seen.append(context)
        return {t: self.lin(v) for t, v in x_dst.items()}


def test_what_a_users_model_declares_is_read_as_declared():
    model = _Declaring()
    traits = layerwise_traits(model)
    assert traits == LayerwiseTraits(True, 1, True, True, uses_edge_attr=False, layer_edges_per_chunk=1000)
    assert not isinstance(model, LayerwiseModel)  # it declares neither layerwise nor uses_edge_attr
    model.layerwise = False
    assert not layerwise_traits(model).layerwise


def test_the_wrapper_of_users_models_passes_their_traits_on():
    wrapped = CustomModel(_Declaring(), "mine:model", HOMOGENEOUS)
    assert isinstance(wrapped, LayerwiseModel)
    assert layerwise_traits(wrapped) == LayerwiseTraits(True, 1, True, True, layer_edges_per_chunk=1000)
    ctx = LayerContext({"_N": torch.arange(2)})
    wrapped.layer(0, {"_N": torch.ones(2, 2)}, {"_N": torch.ones(2, 2)}, {}, context=ctx)
    assert wrapped.module.seen == [ctx]  # layer_context: the context reaches the user's layer
    opted_out = _Declaring()
    opted_out.layerwise = False
    assert not layerwise_traits(CustomModel(opted_out, "mine:model", HOMOGENEOUS)).layerwise


def test_a_users_model_without_num_layers_has_no_layerwise_inference():
    class Partial(nn.Linear):
        def layer(self, i, x_src, x_dst, edges):
            return x_dst

    assert layerwise_traits(Partial(2, 2)) == LayerwiseTraits(True, None)  # it has layer, so it says layerwise
    wrapped = CustomModel(Partial(2, 2), "mine:partial", HOMOGENEOUS)
    assert layerwise_traits(wrapped) == LayerwiseTraits(False, None)  # the wrapper asks for num_layers too


def test_the_docs_list_every_trait_with_its_default():
    text = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text()
    section = text.split("## The layer-wise contract", 1)[1].split("\n## ", 1)[0]
    for name in (*TRAITS, "num_layers", "layer_inputs", "layer"):
        assert f"`{name}`" in section, name

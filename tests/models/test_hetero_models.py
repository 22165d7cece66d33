"""RGCN, RGAT and HGT against plain PyG and hand-derived expectations: messages routed along edge types only,
the relational sums and attention normalisation, empty types, only what the outputs read being built, the
layer-wise protocol on unaligned chunks, and trimming by hop."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.nn import HeteroConv, HGTConv, RGCNConv

from graphshard.models.hgt import HGT
from graphshard.models.rgat import RGAT
from graphshard.models.rgcn import RGCN
from graphshard.models.spec import ModelSpec
from tests.graphs import small_hetero

MODELS = [RGCN, RGAT, HGT]
ETS = [("a", "to", "b"), ("b", "rev_to", "a")]


def _small(cls, **kw):
    torch.manual_seed(0)
    return cls({"a": 3, "b": 2, "c": 4}, ETS, hidden=8, out_dim=2, dropout=0.0, **kw)


def _hetero_inputs():
    """small_hetero's rows (an empty type, an empty relation, a type no relation reaches) and edges."""
    g = small_hetero()
    gen = torch.Generator().manual_seed(3)
    x = {t: torch.randn(g.num_nodes[t], 4, generator=gen) for t in g.ntypes}
    return x, {et: torch.from_numpy(np.stack(g.edges[et])).long() for et in g.edges}


@pytest.mark.parametrize("cls", MODELS)
def test_messages_follow_edge_types_only(cls):
    model = _small(cls).eval()
    x = {"a": torch.randn(3, 3), "b": torch.randn(2, 2), "c": torch.randn(4, 4)}
    edges = {ETS[0]: torch.tensor([[0, 1], [0, 0]]), ETS[1]: torch.tensor([[0], [2]])}
    out = model(x, edges)
    assert {t: v.shape for t, v in out.items()} == {"a": (3, 2), "b": (2, 2), "c": (4, 2)}
    assert torch.allclose(model({**x, "a": torch.randn(3, 3), "b": torch.randn(2, 2)}, edges)["c"], out["c"])
    x3 = {**x, "a": x["a"].clone()}
    x3["a"][0] += 1.0  # b0 has an in-edge from a0, b1 none
    out3 = model(x3, edges)
    assert torch.allclose(out3["b"][1], out["b"][1]) and not torch.allclose(out3["b"][0], out["b"][0])


@pytest.mark.parametrize("cls", MODELS)
def test_empty_types_and_relations(cls):
    x, edges = _hetero_inputs()
    torch.manual_seed(0)
    model = cls({t: 4 for t in x}, list(edges), 8, 3, dropout=0.0).eval()
    out = model(x, edges)
    assert {t: tuple(v.shape) for t, v in out.items()} == {t: (v.shape[0], 3) for t, v in x.items()}
    assert out["ghost"].shape == (0, 3) and torch.isfinite(out["paper"]).all()


@pytest.mark.parametrize("cls", MODELS)
def test_builds_only_what_its_outputs_read(cls):
    """Two layers into ``b``: ``d`` only receives, so it is neither projected nor written, and every
    parameter gets a gradient (DDP needs no search for unused ones)."""
    ets = [("a", "ab", "b"), ("b", "bc", "c"), ("c", "ca", "a"), ("b", "bd", "d")]
    torch.manual_seed(0)
    model = cls({t: 3 for t in "abcd"}, ets, 8, 2, num_layers=2, dropout=0.0, outputs=["b"])
    assert sorted(model.proj.keys()) == ["a", "b", "c"]
    x = {t: torch.randn(3, 3) for t in "abcd"}
    out = model(x, {et: torch.tensor([[0, 1], [1, 2]]) for et in ets})
    assert list(out) == ["b"]
    out["b"].sum().backward()
    assert [n for n, p in model.named_parameters() if p.grad is None] == []


def _layerwise(model, x, edges, chunks: int = 3, seed: int = 0):
    """The model's layers run as graphshard.infer runs them: destinations in shuffled chunks, sources in
    another order, so that source and destination positions are not aligned."""
    gen = torch.Generator().manual_seed(seed)
    h = model.layer_inputs(x)
    for i in range(model.num_layers):
        order = {t: torch.randperm(v.shape[0], generator=gen) for t, v in h.items()}  # source order
        at = {t: torch.argsort(o) for t, o in order.items()}  # node -> its source position
        x_src = {t: v[order[t]] for t, v in h.items()}
        dst_order = {t: torch.randperm(v.shape[0], generator=gen) for t, v in h.items()}
        parts = []
        for c in range(chunks):
            dst = {t: o[c::chunks] for t, o in dst_order.items()}
            pos = {t: torch.full((v.shape[0],), -1, dtype=torch.long) for t, v in h.items()}
            for t, d in dst.items():
                pos[t][d] = torch.arange(d.shape[0])
            sel = {et: ei[:, pos[et[2]][ei[1]] >= 0] for et, ei in edges.items()}
            chunk_edges = {et: torch.stack([at[et[0]][e[0]], pos[et[2]][e[1]]]) for et, e in sel.items()}
            parts.append((dst, model.layer(i, x_src, {t: h[t][d] for t, d in dst.items()}, chunk_edges)))
        h = {
            t: torch.cat([r[t] for _, r in parts])[torch.argsort(torch.cat([d[t] for d, _ in parts]))]
            for t in parts[0][1]
        }
    return h


@pytest.mark.parametrize("cls", MODELS)
def test_layers_on_unaligned_chunks_equal_the_forward_pass(cls):
    x, edges = _hetero_inputs()
    torch.manual_seed(0)
    model = cls({t: 4 for t in x}, list(edges), 8, 3, num_layers=2).eval()
    want = model(x, edges)  # with autograd: PyG's message passing (RGCN's layers average by CSR products)
    with torch.no_grad():
        got = _layerwise(model, x, edges)
    assert sorted(got) == sorted(want)
    for t in want:
        assert torch.allclose(got[t], want[t], atol=1e-5), t


@pytest.mark.parametrize("cls", MODELS)
def test_trimmed_by_hop_gives_the_seeds_the_same_rows(cls):
    from graphshard.sampling import CSCGraph, sample_neighbors
    from graphshard.sampling.hetero import to_hetero

    rng = np.random.default_rng(1)
    n, types = 300, ["a", "b", "c"]
    ntype = rng.integers(0, 3, n)
    node_id = np.zeros(n, dtype=np.int64)
    for t in range(3):
        node_id[ntype == t] = np.arange(int((ntype == t).sum()))
    dst = np.sort(rng.integers(0, n, 3000))
    graph = CSCGraph(np.searchsorted(dst, np.arange(n + 1)), rng.integers(0, n, 3000))
    etypes = [(types[s], f"r{s}{d}", types[d]) for s in range(3) for d in range(3)]
    out = sample_neighbors(graph, np.flatnonzero(ntype != 2)[:6], [4, 3], seed=2)
    het = to_hetero(
        out,
        types,
        ntype[out.node],
        node_id[out.node],
        etypes=etypes,
        edge_type=3 * ntype[out.node[out.row]] + ntype[out.node[out.col]],
        edge_id=out.edge,
    )
    x = {t: torch.randn(het.node[t].shape[0], 4) for t in types}
    edges = {et: torch.from_numpy(np.stack([het.row[et], het.col[et]])) for et in etypes}
    torch.manual_seed(0)
    model = cls({t: 4 for t in types}, etypes, 8, 3, num_layers=2, outputs=["a", "b"]).eval()
    full = model(x, edges)
    trimmed = model(x, edges, (het.num_sampled_nodes, het.num_sampled_edges))
    for t in ("a", "b"):
        seeds = het.num_sampled_nodes[t][0]
        assert seeds > 0 and trimmed[t].shape == (seeds, 3), (t, trimmed[t].shape)
        assert torch.allclose(trimmed[t], full[t][:seeds], atol=1e-6), t


def test_rgcn_equals_pyg_rgcnconv_with_a_root_per_type():
    """One layer: PyG's RGCNConv (mean per relation, summed) over both types in one index space, two
    relations between the same pair of types, plus the root of each node's own type; the relations are
    averaged (RGCNConv with each weight divided by the 3 relations into "b")."""
    ets = [("a", "r1", "b"), ("a", "r2", "b"), ("b", "r3", "b")]
    torch.manual_seed(0)
    model = RGCN({"a": 3, "b": 2}, ets, 6, 4, num_layers=1, outputs=["b"]).eval()
    x = {"a": torch.randn(5, 3), "b": torch.randn(4, 2)}
    edges = {
        ets[0]: torch.tensor([[0, 1, 2], [0, 0, 1]]),
        ets[1]: torch.tensor([[4], [0]]),
        ets[2]: torch.tensor([[1, 2, 3], [0, 0, 3]]),
    }
    h = model.layer_inputs(x)
    rgcn = RGCNConv(6, 4, num_relations=3, aggr="mean", root_weight=False, bias=False)
    with torch.no_grad():
        for r, et in enumerate(ets):
            rgcn.weight[r] = model.convs[0].convs[et].lin_l.weight.t() / 3
        shift = {"a": 0, "b": 5}
        ei = torch.cat([edges[et] + torch.tensor([[shift[et[0]]], [shift[et[2]]]]) for et in ets], 1)
        kind = torch.cat([torch.full((edges[et].shape[1],), r) for r, et in enumerate(ets)])
        want = rgcn(torch.cat([h["a"], h["b"]]), ei, kind)[5:] + model.roots[0]["b"](h["b"])
        assert torch.allclose(model(x, edges)["b"], want, atol=1e-6)


@pytest.mark.filterwarnings("ignore:There exist node types:UserWarning")  # "a" only sends: as intended
def test_rgat_averages_per_relation_gats_and_adds_a_root():
    """One layer equals PyG's HeteroConv(aggr="mean") of the model's GATConvs plus the root of the type."""
    ets = [("a", "r1", "b"), ("b", "r2", "b")]
    torch.manual_seed(0)
    model = RGAT({"a": 3, "b": 2}, ets, 8, 4, num_layers=1, heads=2, outputs=["b"]).eval()
    x = {"a": torch.randn(5, 3), "b": torch.randn(4, 2)}
    edges = {ets[0]: torch.tensor([[0, 1, 2], [0, 0, 1]]), ets[1]: torch.tensor([[1, 2, 3], [0, 0, 3]])}
    h = model.layer_inputs(x)
    conv = HeteroConv({et: model.convs[0].convs[et] for et in ets}, aggr="mean")
    with torch.no_grad():
        want = conv(h, edges)["b"] + model.roots[0]["b"](h["b"])
        assert torch.allclose(model(x, edges)["b"], want, atol=1e-6)


@pytest.mark.parametrize("cls", [RGAT, HGT])
def test_attention_is_normalised_over_the_in_neighbourhood(cls):
    """Sources with equal rows get equal weights summing to one: three of them give what one gives."""
    torch.manual_seed(0)
    model = cls({"a": 3, "b": 2}, [("a", "r", "b")], 8, 4, num_layers=1, heads=2, outputs=["b"]).eval()
    x = {"a": torch.randn(1, 3).repeat(3, 1), "b": torch.randn(2, 2)}
    one = model(x, {("a", "r", "b"): torch.tensor([[0], [0]])})["b"]
    three = model(x, {("a", "r", "b"): torch.tensor([[0, 1, 2], [0, 0, 0]])})["b"]
    assert torch.allclose(one, three, atol=1e-6)


def _twin_relations(cls):
    """A model with two relations from ``a`` into ``b`` given the same weights, and its three inputs: an
    edge a0 -> b0 in neither, in one, in both relations."""
    ets = [("a", "r1", "b"), ("a", "r2", "b")]
    torch.manual_seed(0)
    model = cls({"a": 3, "b": 2}, ets, 8, 4, num_layers=1, heads=2, outputs=["b"]).eval()
    with torch.no_grad():
        if cls is RGAT:
            model.convs[0].convs[ets[1]].load_state_dict(model.convs[0].convs[ets[0]].state_dict())
        else:  # HGTConv's relation maps: one per (head, relation), relation fastest
            for lin in (model.convs["0"].k_rel, model.convs["0"].v_rel):
                lin.weight[1::2] = lin.weight[0::2]
    x = {"a": torch.randn(2, 3), "b": torch.randn(2, 2)}
    e, none = torch.tensor([[1, 0], [0, 0]]), torch.zeros((2, 0), dtype=torch.long)
    return [model(x, {ets[0]: a, ets[1]: b})["b"][0] for a, b in ((none, none), (e, none), (e, e))]


def test_rgat_attends_within_each_relation_and_sums_them():
    neither, one, both = _twin_relations(RGAT)
    assert torch.allclose(both - one, one - neither, atol=1e-6) and not torch.allclose(one, neither)


def test_hgt_attends_over_all_relations_at_once():
    """The twin edges share one softmax: each gets half the weight, the sum is one relation's."""
    neither, one, both = _twin_relations(HGT)
    assert torch.allclose(both, one, atol=1e-6) and not torch.allclose(one, neither)


def test_hgt_layer_is_pyg_hgtconv():
    """Without attention dropout, the conv is PyG's HGTConv (whose unused maps it dropped), then the head."""
    ets = [("a", "r1", "b"), ("b", "r2", "b")]
    torch.manual_seed(0)
    model = HGT({"a": 3, "b": 2}, ets, 8, 4, num_layers=1, heads=2, outputs=["b"]).eval()
    plain = HGTConv(8, 8, (["a", "b"], ets), heads=2)
    assert plain.load_state_dict(model.convs["0"].state_dict(), strict=False).unexpected_keys == []
    x = {"a": torch.randn(5, 3), "b": torch.randn(4, 2)}
    edges = {ets[0]: torch.tensor([[0, 1, 2], [0, 0, 1]]), ets[1]: torch.tensor([[1, 2, 3], [0, 0, 3]])}
    with torch.no_grad():
        want = model.head["b"](plain(model.layer_inputs(x), edges)["b"])
        assert torch.allclose(model(x, edges)["b"], want, atol=1e-6)
    model.train().convs["0"].attn_dropout = 0.5
    assert not torch.allclose(model(x, edges)["b"], want)


@pytest.mark.parametrize("cls", MODELS)
def test_from_spec_and_sparse_inputs(cls):
    spec = ModelSpec({"a": 3, "b": 2}, 4, ["a", "b"], ETS, outputs=["b"], hidden=6, num_layers=1, heads=3)
    model = cls.from_spec(spec).eval()
    assert model.outputs == ["b"] and model.num_layers == 1
    x = {"a": torch.randn(3, 3), "b": torch.randn(2, 2)}
    edges = {ETS[0]: torch.tensor([[0, 2], [1, 1]]), ETS[1]: torch.zeros((2, 0), dtype=torch.long)}
    dense = model(x, edges)["b"]
    assert dense.shape == (2, 4)
    assert torch.allclose(model({**x, "a": x["a"].to_sparse()}, edges)["b"], dense, atol=1e-6)


@pytest.mark.parametrize("cls", [RGAT, HGT])
def test_hidden_must_split_into_heads(cls):
    with pytest.raises(ValueError, match="multiple of the 3 attention heads"):
        cls({"a": 3}, [("a", "r", "a")], 8, 2, heads=3)


def test_a_layerwise_chunk_transforms_only_the_sources_it_reads():
    from graphshard.models.hetero_stack import compact

    x_src = {"a": torch.arange(10.0)[:, None], "b": torch.arange(4.0)[:, None], "c": torch.ones(3, 1)}
    edges = {
        ("a", "r", "b"): torch.tensor([[7, 2, 7], [0, 1, 2]]),
        ("a", "s", "a"): torch.tensor([[2, 9], [0, 0]]),
        ("b", "t", "a"): torch.tensor([[1], [1]]),
    }
    rows, out = compact(x_src, edges)
    assert rows["a"].flatten().tolist() == [2.0, 7.0, 9.0] and rows["b"].flatten().tolist() == [1.0]
    assert rows["c"].shape == (0, 1)
    assert out[("a", "r", "b")].tolist() == [[1, 0, 1], [0, 1, 2]] and out[("a", "s", "a")].tolist() == [[0, 2], [0, 0]]
    assert out[("b", "t", "a")].tolist() == [[0], [1]]

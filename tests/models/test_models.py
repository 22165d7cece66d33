"""Models against hand-computed expectations: the heterogeneous GraphSAGE's message routing, the MLP
baseline ignoring edges, the decoders."""

from __future__ import annotations

import torch

from graphshard.models import MLP, DotDecoder, GraphSAGE, HeteroSAGE, LinkModel, MLPDecoder


def _hetero():
    torch.manual_seed(0)
    ets = [("a", "to", "b"), ("b", "rev_to", "a")]
    return HeteroSAGE({"a": 3, "b": 2, "c": 4}, ets, hidden=5, out_dim=2, num_layers=2, dropout=0.0)


def test_hetero_sage_routes_messages_along_edge_types_only():
    model = _hetero().eval()
    x = {"a": torch.randn(3, 3), "b": torch.randn(2, 2), "c": torch.randn(4, 4)}
    edges = {("a", "to", "b"): torch.tensor([[0, 1], [0, 0]]), ("b", "rev_to", "a"): torch.tensor([[0], [2]])}
    out = model(x, edges)
    assert {t: v.shape for t, v in out.items()} == {"a": (3, 2), "b": (2, 2), "c": (4, 2)}
    # "c" is reached by no edge type: its rows depend on its own input only
    x2 = {**x, "a": torch.randn(3, 3), "b": torch.randn(2, 2)}
    assert torch.allclose(model(x2, edges)["c"], out["c"])
    # b1 has no in-edge: changing a0 leaves its row alone; b0 has one from a0: its row changes
    x3 = {**x, "a": x["a"].clone()}
    x3["a"][0] += 1.0
    out3 = model(x3, edges)
    assert torch.allclose(out3["b"][1], out["b"][1]) and not torch.allclose(out3["b"][0], out["b"][0])


def test_hetero_sage_returns_only_requested_types():
    torch.manual_seed(0)
    model = HeteroSAGE({"a": 3, "b": 2}, [("a", "to", "b")], 4, 2, num_layers=1, dropout=0.0, outputs=["b"])
    out = model({"a": torch.randn(2, 3), "b": torch.randn(2, 2)}, {("a", "to", "b"): torch.tensor([[0], [1]])})
    assert list(out) == ["b"]


def test_mlp_ignores_edges_and_maps_the_target_type():
    torch.manual_seed(0)
    mlp = MLP(3, 8, 2, num_layers=2, dropout=0.0, target="a").eval()
    x = torch.randn(4, 3)
    edges = torch.tensor([[0, 1], [1, 2]])
    assert torch.equal(mlp(x, edges), mlp(x, torch.zeros((2, 0), dtype=torch.long)))
    assert torch.equal(mlp({"a": x, "b": torch.randn(1, 5)}, {})["a"], mlp(x))


def test_decoders_score_pairs():
    src, dst = torch.tensor([[1.0, 2.0], [0.0, 1.0]]), torch.tensor([[3.0, 4.0], [5.0, 6.0]])
    assert DotDecoder()(src, dst).tolist() == [11.0, 6.0]
    mlp = MLPDecoder(2, 4)
    assert mlp(src, dst).shape == (2,)

    class Rows(torch.nn.Module):  # an encoder whose representations are its inputs
        def forward(self, x, edge_index, hops):
            return x

    model = LinkModel(Rows(), DotDecoder(), "n", "n")
    h = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    assert model(h, None, None, torch.tensor([[0, 2], [2, 1]])).tolist() == [1.0, 2.0]


def test_graphsage_trimmed_by_hop_gives_the_seeds_the_same_rows():
    import numpy as np

    from graphshard.sampling import CSCGraph, sample_neighbors

    rng = np.random.default_rng(0)
    n = 300
    dst = np.sort(rng.integers(0, n, 3000))
    graph = CSCGraph(np.searchsorted(dst, np.arange(n + 1)), rng.integers(0, n, 3000))
    out = sample_neighbors(graph, np.array([5, 17, 42, 99]), [4, 3], seed=1)
    x = torch.randn(out.node.shape[0], 6)
    edge_index = torch.from_numpy(np.stack([out.row, out.col]))
    torch.manual_seed(0)
    model = GraphSAGE(6, 8, 3, num_layers=2).eval()
    full = model(x, edge_index)[:4]
    trimmed = model(x, edge_index, (out.num_sampled_nodes, out.num_sampled_edges))
    assert trimmed.shape == (4, 3) and torch.allclose(trimmed, full, atol=1e-6)
    # in training, the first layer averages its inputs outside autograd: the same loss and weight gradients
    # as PyG's own SAGEConv layers, untrimmed
    model.train().dropout = 0.0
    grads = []
    for hops in (None, (out.num_sampled_nodes, out.num_sampled_edges)):
        model.zero_grad()
        loss = model(x, edge_index, hops)[:4].square().sum()
        loss.backward()
        grads.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    assert torch.allclose(grads[0][0], grads[1][0], rtol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(grads[0][1], grads[1][1]))


def _pyg_forward(model, x, edges):
    """The model's layers run through PyG's own ``HeteroConv`` (mean over relations), untrimmed."""
    x = {t: lin(x[t]) for t, lin in model.proj.items()}
    for i, (conv, keep) in enumerate(zip(model.convs, model.keep)):
        out = conv(x, {et: edges[et] for et in conv.convs.keys()})
        out.update({t: lin(x[t]) for t, lin in keep.items()})
        x = {t: torch.relu(v) for t, v in out.items()} if i < len(model.convs) - 1 else out
    return x


def test_hetero_sage_trimmed_by_hop_gives_the_seeds_the_same_rows():
    import numpy as np

    from graphshard.sampling import CSCGraph, sample_neighbors
    from graphshard.sampling.hetero import to_hetero

    rng = np.random.default_rng(1)
    n, types = 400, ["a", "b", "c"]
    ntype = rng.integers(0, 3, n)
    node_id = np.zeros(n, dtype=np.int64)
    for t in range(3):  # per-type IDs in homogeneous order
        node_id[ntype == t] = np.arange(int((ntype == t).sum()))
    dst = np.sort(rng.integers(0, n, 4000))
    src = rng.integers(0, n, 4000)
    graph = CSCGraph(np.searchsorted(dst, np.arange(n + 1)), src)
    etypes = [(types[s], f"r{s}{d}", types[d]) for s in range(3) for d in range(3)]
    out = sample_neighbors(graph, np.flatnonzero(ntype != 2)[:6], [4, 3], seed=2)
    sampled_src, sampled_dst = out.node[out.row], out.node[out.col]
    het = to_hetero(
        out,
        types,
        ntype[out.node],
        node_id[out.node],
        etypes=etypes,
        edge_type=3 * ntype[sampled_src] + ntype[sampled_dst],
        edge_id=out.edge,
    )
    x = {t: torch.randn(het.node[t].shape[0], 4) for t in types}
    edges = {et: torch.from_numpy(np.stack([het.row[et], het.col[et]])) for et in etypes}
    torch.manual_seed(0)
    model = HeteroSAGE({t: 4 for t in types}, etypes, 8, 3, num_layers=2, dropout=0.0, outputs=["a", "b"]).eval()
    full = model(x, edges)
    reference = _pyg_forward(model, x, edges)
    assert all(torch.allclose(full[t], reference[t], atol=1e-6) for t in ("a", "b"))
    trimmed = model(x, edges, (het.num_sampled_nodes, het.num_sampled_edges))
    for t in ("a", "b"):
        seeds = het.num_sampled_nodes[t][0]
        assert seeds > 0 and trimmed[t].shape == (seeds, 3), (t, trimmed[t].shape)
        assert torch.allclose(trimmed[t], full[t][:seeds], atol=1e-6), t


def test_hetero_sage_builds_only_what_its_outputs_read():
    """Two layers into ``b``: the last layer needs only the relation into ``b``, the first those into ``a``
    and ``b``; ``d``, which only receives, is neither projected nor reached, so every parameter is used."""
    ets = [("a", "ab", "b"), ("b", "bc", "c"), ("c", "ca", "a"), ("b", "bd", "d")]
    model = HeteroSAGE({t: 3 for t in "abcd"}, ets, 4, 2, num_layers=2, dropout=0.0, outputs=["b"])
    assert list(model.convs[1].convs.keys()) == [("a", "ab", "b")]
    assert sorted(model.convs[0].convs.keys()) == [("a", "ab", "b"), ("c", "ca", "a")]
    assert sorted(model.proj.keys()) == ["a", "b", "c"]
    x = {t: torch.randn(3, 3) for t in "abcd"}
    edges = {et: torch.tensor([[0, 1], [1, 2]]) for et in ets}
    model(x, edges)["b"].sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_sparse_inputs_project_like_dense_ones():
    from graphshard.models.hetero_stack import project
    from graphshard.sparse import sparse_tensor
    from tests.graphs import sparse_hetero

    x = sparse_hetero().node_feats["paper"]["bow"]
    torch.manual_seed(0)
    lin = torch.nn.Linear(50, 6)
    dense = torch.from_numpy(x.dense())
    sparse = project(lin, sparse_tensor(x))
    assert torch.allclose(sparse, lin(dense), atol=1e-5)
    sparse.sum().backward()
    grad = lin.weight.grad.clone()
    lin.weight.grad = None
    lin(dense).sum().backward()
    assert torch.allclose(grad, lin.weight.grad, atol=1e-4)

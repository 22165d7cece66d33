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
    model = HeteroSAGE({"a": 3, "b": 2}, [("a", "to", "b")], 4, 2, 1, 0.0, outputs=["b"])
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

"""Layer-wise inference is exact: on several partitions and 1–3 ranks, every node's output equals the
model's forward pass over the whole, unpartitioned graph (PyG layers on the whole edge_index), and each
rank reads each remote row once per layer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphshard import partition_graph
from graphshard.distributed import launch
from graphshard.models import GraphSAGE, HeteroSAGE
from tests.graphs import small_hetero, small_homo

FEATURELESS_DIM = 3


def _featureless(t: str, ids: torch.Tensor) -> torch.Tensor:
    """Deterministic inputs for node types without features (a stand-in for learnt embeddings)."""
    k = torch.arange(1, FEATURELESS_DIM + 1, dtype=torch.float32)
    return torch.sin(ids.float()[:, None] * k + len(t))


def _model(in_dims: dict[str, int] | int, etypes=None) -> torch.nn.Module:
    torch.manual_seed(7)
    if isinstance(in_dims, int):
        return GraphSAGE(in_dims, 8, 5, num_layers=3)
    return HeteroSAGE(in_dims, etypes, 8, 5, num_layers=2)


def _rank(config: str, in_dims, out: str) -> None:
    from graphshard.distributed import DistGraph, session
    from graphshard.infer import layerwise_inference

    with session(timeout=120) as s:
        g = DistGraph("g", config)
        model = _model(in_dims, g.canonical_etypes)

        def inputs(t: str, ids: torch.Tensor) -> torch.Tensor:
            data = g.nodes[t].data
            if "feat" in data:
                return data["feat"][ids].float()
            return _featureless(t, g.get_partition_book().to_original(t, ids))  # defined on original IDs

        tables, plans = layerwise_inference(g, model, inputs, "test")
        served, expected_remote = g.sampling_graph, 0
        for part, plan in zip(g.local_graphs, plans):  # one per stored partition this rank serves
            lo, hi = plan.dst_lo, plan.dst_hi
            sources = part.ndata["_ID"].numpy()[np.unique(part.indices.numpy()[part.indptr[lo]: part.indptr[hi]])]
            # distinct in-neighbours served by other processes
            expected_remote += int(((sources < served.start) | (sources >= served.start + served.count)).sum())
        fetched = [sum(f) for f in zip(*(p.fetched for p in plans))]
        np.save(f"{out}.fetched{s.rank}.npy", np.array(fetched + [expected_remote]))
        if s.rank == 0:
            book = g.get_partition_book()
            for t, table in tables.items():
                ids = torch.arange(g.num_nodes(t))
                rows = np.zeros(table.shape, np.float32)
                rows[book.to_original(t, ids).numpy()] = table[ids].numpy()
                np.save(f"{out}.{t}.npy", rows)
        g.barrier()


def _check(tmp_path, graph, expected: dict[str, torch.Tensor], in_dims, parts: int, ranks: int, layers: int):
    partition_graph(graph, "g", parts, tmp_path / "p", part_method="random")
    out = str(tmp_path / "out")
    launch(_rank, ranks, (str(tmp_path / "p" / "g.json"), in_dims, out), timeout=120)
    for t, want in expected.items():
        got = np.load(f"{out}.{t}.npy")
        assert got.shape == tuple(want.shape), t
        np.testing.assert_allclose(got, want.numpy(), atol=1e-5, rtol=0)
    for r in range(ranks):
        fetched = np.load(f"{out}.fetched{r}.npy")
        reads, expected_remote = fetched[:-1], fetched[-1]
        assert len(reads) == layers  # the inputs, then every layer but the last
        assert (reads == expected_remote).all(), (r, reads, expected_remote)
        if parts > 1:
            assert expected_remote > 0  # the check is not vacuous: there are remote in-neighbours


@pytest.mark.parametrize("parts, ranks", [(1, 1), (2, 2), (3, 3), (1, 2), (4, 2)])
def test_homogeneous_graphsage_equals_a_full_graph_forward(tmp_path, parts, ranks):
    g = small_homo()
    x = torch.from_numpy(g.node_feats["_N"]["feat"]).float()
    src, dst = g.edges[("_N", "_E", "_N")]
    model = _model(x.shape[1]).eval()
    with torch.no_grad():
        want = model(x, torch.from_numpy(np.stack([src, dst])).long())
    _check(tmp_path, g, {"_N": want}, x.shape[1], parts, ranks, layers=3)


@pytest.mark.parametrize("parts, ranks", [(2, 2), (1, 2), (4, 2)])
def test_heterogeneous_sage_equals_a_full_graph_forward(tmp_path, parts, ranks):
    g = small_hetero()
    x = {t: torch.from_numpy(g.node_feats[t]["feat"]).float() if "feat" in g.node_feats.get(t, {})
         else _featureless(t, torch.arange(g.num_nodes[t])) for t in g.ntypes}
    dims = {t: int(v.shape[1]) for t, v in x.items()}
    model = _model(dims, list(g.edges)).eval()
    with torch.no_grad():
        want = model(x, {et: torch.from_numpy(np.stack(g.edges[et])).long() for et in g.edges})
    _check(tmp_path, g, want, dims, parts, ranks, layers=2)

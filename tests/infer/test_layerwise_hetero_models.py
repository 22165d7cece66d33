"""Layer-wise inference of RGCN, RGAT and HGT is exact: on random partitions served by 2 ranks, every node's
output equals the same model's forward pass over the whole, unpartitioned graph, and each rank reads each
remote row once per layer. One launch computes all three models on both partitionings (the ranks' start-up
is most of the time). Each model also runs chunk by chunk on a device (the CPU standing in for one)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphshard import partition_graph
from graphshard.distributed import launch
from graphshard.models.hgt import HGT
from graphshard.models.rgat import RGAT
from graphshard.models.rgcn import RGCN
from tests.graphs import small_hetero

MODELS = {"rgcn": RGCN, "rgat": RGAT, "hgt": HGT}
FEATURELESS_DIM = 3


def _featureless(t: str, ids: torch.Tensor) -> torch.Tensor:
    """Deterministic inputs for node types without features (a stand-in for learnt embeddings)."""
    k = torch.arange(1, FEATURELESS_DIM + 1, dtype=torch.float32)
    return torch.sin(ids.float()[:, None] * k + len(t))


def _model(name: str, in_dims: dict[str, int], etypes) -> torch.nn.Module:
    """Out width 5, not a multiple of the 2 heads; dropouts that eval mode must switch off."""
    torch.manual_seed(7)
    kw = {} if name == "rgcn" else {"heads": 2, "attn_dropout": 0.3}
    return MODELS[name](in_dims, list(etypes), 8, 5, num_layers=2, dropout=0.5, **kw)


def _rank(jobs: list[tuple[str, str, str]], in_dims: dict[str, int]) -> None:
    """Every job ``(graph name, partition config, output prefix)`` in turn: one launch for all of them."""
    from graphshard.distributed import DistGraph, session
    from graphshard.infer import layerwise_inference

    with session(timeout=120) as s:
        for graph, config, out in jobs:
            g = DistGraph(graph, config)
            book = g.get_partition_book()

            def inputs(t: str, ids: torch.Tensor, g=g, book=book) -> torch.Tensor:
                data = g.nodes[t].data
                return data["feat"][ids].float() if "feat" in data else _featureless(t, book.to_original(t, ids))

            for name, device in [(m, d) for m in MODELS for d in (None, torch.device("cpu"))]:
                model = _model(name, in_dims, g.canonical_etypes)
                name = name if device is None else f"{name}-ondevice"
                tables, plans = layerwise_inference(g, model, inputs, name, device=device)
                served, expected_remote = g.sampling_graph, 0
                for part, plan in zip(g.local_graphs, plans):
                    lo, hi = plan.dst_lo, plan.dst_hi
                    src = part.ndata["_ID"].numpy()[np.unique(part.indices.numpy()[part.indptr[lo] : part.indptr[hi]])]
                    expected_remote += int(((src < served.start) | (src >= served.start + served.count)).sum())
                fetched = [sum(f) for f in zip(*(p.fetched for p in plans))]
                np.save(f"{out}.{name}.fetched{s.rank}.npy", np.array(fetched + [expected_remote]))
                if s.rank == 0:
                    for t, table in tables.items():
                        ids = torch.arange(g.num_nodes(t))
                        rows = np.zeros(table.shape, np.float32)
                        rows[book.to_original(t, ids).numpy()] = table[ids].numpy()
                        np.save(f"{out}.{name}.{t}.npy", rows)
                g.barrier()


def _inputs() -> tuple[dict[str, torch.Tensor], dict]:
    g = small_hetero()
    x = {
        t: torch.from_numpy(g.node_feats[t]["feat"]).float()
        if "feat" in g.node_feats.get(t, {})
        else _featureless(t, torch.arange(g.num_nodes[t]))
        for t in g.ntypes
    }
    return x, {et: torch.from_numpy(np.stack(g.edges[et])).long() for et in g.edges}


PARTS = [2, 4]  # partitionings, each served by 2 ranks


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``run(parts, ranks)``: the output prefix of the partitioning into ``parts`` (all made in one launch)."""
    root = tmp_path_factory.mktemp("runs")
    jobs = []
    for parts in PARTS:
        name = f"p{parts}"
        partition_graph(small_hetero(), name, parts, root / name, part_method="random")
        jobs.append((name, str(root / name / f"{name}.json"), str(root / name / "out")))
    dims = {t: int(v.shape[1]) for t, v in _inputs()[0].items()}
    launch(_rank, 2, (jobs, dims), timeout=240)

    def run(parts: int, ranks: int) -> str:
        assert ranks == 2
        return str(root / f"p{parts}" / "out")

    return run


@pytest.mark.parametrize("parts, ranks", [(parts, 2) for parts in PARTS])
@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("where", ["", "-ondevice"])
def test_layerwise_equals_a_full_graph_forward(runs, name, parts, ranks, where):
    x, edges = _inputs()
    model = _model(name, {t: int(v.shape[1]) for t, v in x.items()}, edges).eval()
    with torch.no_grad():
        want = model(x, edges)
    out = runs(parts, ranks)
    name += where
    for t, rows in want.items():
        got = np.load(f"{out}.{name}.{t}.npy")
        assert got.shape == tuple(rows.shape), t
        np.testing.assert_allclose(got, rows.numpy(), atol=1e-5, rtol=0, err_msg=t)
    for r in range(ranks):
        fetched = np.load(f"{out}.{name}.fetched{r}.npy")
        reads, expected_remote = fetched[:-1], fetched[-1]
        assert len(reads) == 2  # the inputs, then the first layer's output
        assert (reads == expected_remote).all(), (r, reads, expected_remote)
        if parts > 1:
            assert expected_remote > 0  # the check is not vacuous: there are remote in-neighbours

"""Layer-wise inference is exact: on several partitions and 1–3 ranks, every node's output equals the
model's forward pass over the whole, unpartitioned graph (PyG layers on the whole edge_index), and each
rank reads each remote row once per layer. Every case runs twice: on the host, and chunk by chunk on a device
(the CPU standing in for one: each chunk's rows compacted and renumbered, as a GPU gets them)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphshard import Graph, partition_graph
from graphshard.distributed import launch
from graphshard.models import GAT, GCN, GIN, GraphSAGE, HeteroSAGE, ModelSpec
from graphshard.models.custom import build_custom
from tests.graphs import small_hetero, small_homo

FEATURELESS_DIM = 3
ON_DEVICE = "-ondevice"  # the suffix of the outputs computed chunk by chunk on a device


def _featureless(t: str, ids: torch.Tensor) -> torch.Tensor:
    """Deterministic inputs for node types without features (a stand-in for learnt embeddings)."""
    k = torch.arange(1, FEATURELESS_DIM + 1, dtype=torch.float32)
    return torch.sin(ids.float()[:, None] * k + len(t))


HOMOGENEOUS = {  # kind -> (model, whether it reads the edge feature "w")
    "sage": (lambda d: GraphSAGE(d, 8, 5, num_layers=3), False),
    "gcn": (lambda d: GCN(d, 8, 5, num_layers=3), False),
    "gat": (lambda d: GAT(d, 8, 5, num_layers=3, heads=2), False),
    "gat-edge": (lambda d: GAT(d, 8, 5, num_layers=2, heads=4, edge_dim=1), True),
    "gin": (lambda d: GIN(d, 8, 5, num_layers=2), False),
    "gine": (lambda d: GIN(d, 8, 5, num_layers=2, edge_dim=1), True),
    "pyg-gcn": (lambda d: _users("pyg_gcn", d), False),  # PyG's own models, as the user's factory returns them
    "pyg-gat": (lambda d: _users("pyg_gat", d), False),
}


def _users(factory: str, in_dim: int) -> torch.nn.Module:
    spec = ModelSpec({"_N": in_dim}, 5, ["_N"], [("_N", "_E", "_N")], outputs=["_N"], hidden=8, num_layers=3)
    return build_custom(f"tests.train.custom_factories:{factory}", spec)


def _model(in_dims: dict[str, int] | int, etypes=None, kind: str = "sage") -> torch.nn.Module:
    torch.manual_seed(7)
    if isinstance(in_dims, int):
        return HOMOGENEOUS[kind][0](in_dims)
    return HeteroSAGE(in_dims, etypes, 8, 5, num_layers=2)


def _edge_w(g, et, ids: torch.Tensor) -> torch.Tensor:
    return g.edges[et].data["w"][ids].float().view(-1, 1)


def _rank(jobs: list[tuple[str, str, object, str, tuple[str, ...]]]) -> None:
    """One rank of a launch that runs every job ``(config, graph name, in_dims, out, model kinds)`` in turn:
    one launch for all the models of a test, and for all the 2-rank cases of this module."""
    from graphshard.distributed import DistGraph, session

    with session(timeout=120) as s:
        for config, name, in_dims, out, kinds in jobs:
            g = DistGraph(name, config)
            for kind in kinds:
                _infer(s, g, _model(in_dims, g.canonical_etypes, kind), f"{out}.{kind}")
                _infer(s, g, _model(in_dims, g.canonical_etypes, kind), f"{out}.{kind}{ON_DEVICE}", torch.device("cpu"))


def _infer(s, g, model: torch.nn.Module, out: str, device: torch.device | None = None) -> None:
    """``model``'s layer-wise outputs (rank 0 saves them in original ID order) and every rank's remote reads."""
    from graphshard.infer import layerwise_inference

    def inputs(t: str, ids: torch.Tensor) -> torch.Tensor:
        data = g.nodes[t].data
        if "feat" in data:
            return data["feat"][ids].float()
        return _featureless(t, g.get_partition_book().to_original(t, ids))  # defined on original IDs

    name = out.rsplit(".", 1)[-1]  # the model kind: each model's tables have their own names
    tables, plans = layerwise_inference(
        g, model, inputs, name, edge_rows=lambda et, ids: _edge_w(g, et, ids), device=device
    )
    served, expected_remote = g.sampling_graph, 0
    for part, plan in zip(g.local_graphs, plans):  # one per stored partition this rank serves
        lo, hi = plan.dst_lo, plan.dst_hi
        sources = part.ndata["_ID"].numpy()[np.unique(part.indices.numpy()[part.indptr[lo] : part.indptr[hi]])]
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
    for table in tables.values():
        table.free()


def _hetero_inputs(g: Graph) -> dict[str, torch.Tensor]:
    return {
        t: torch.from_numpy(g.node_feats[t]["feat"]).float()
        if "feat" in g.node_feats.get(t, {})
        else _featureless(t, torch.arange(g.num_nodes[t]))
        for t in g.ntypes
    }


def _case(graph: str) -> tuple[Graph, object, tuple[str, ...]]:
    """The graph of each test below, its models' input widths and the model kinds run on it."""
    if graph == "homo":
        g = small_homo()
        return g, int(g.node_feats["_N"]["feat"].shape[1]), ("sage",)
    if graph == "hetero":
        g = small_hetero()
        return g, {t: int(v.shape[1]) for t, v in _hetero_inputs(g).items()}, ("sage",)
    g = _with_loops_and_repeats(small_homo())
    return g, int(g.node_feats["_N"]["feat"].shape[1]), tuple(k for k in HOMOGENEOUS if k != "sage")


# every 2-rank case of the tests below, (graph, parts): all run in one launch (a launch costs seconds of start-up)
TWO_RANKS = [
    *(("homo", parts) for parts in (2, 1, 4)),
    *(("hetero", parts) for parts in (2, 1, 4)),
    *(("models", parts) for parts in (2, 4)),
]


def _job(root, graph: str, parts: int) -> tuple[str, str, object, str, tuple[str, ...]]:
    """``graph`` partitioned into ``parts`` under ``root``: the job :func:`_rank` runs on it."""
    g, in_dims, kinds = _case(graph)
    name = f"{graph}{parts}"
    partition_graph(g, name, parts, root / name, part_method="random")
    return str(root / name / f"{name}.json"), name, in_dims, str(root / name / "out"), kinds


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """The layer-wise outputs of every 2-rank case, from one launch: ``<root>/<graph><parts>/out.<kind>...``."""
    root = tmp_path_factory.mktemp("two-ranks")
    launch(_rank, 2, ([_job(root, graph, parts) for graph, parts in TWO_RANKS],), timeout=240)
    return root


def _check(request, graph: str, expected: dict[str, dict[str, torch.Tensor]], parts: int, ranks: int, layers) -> None:
    """Every model kind's layer-wise outputs for ``graph`` on ``parts`` partitions and ``ranks`` ranks (computed
    in one launch) against ``expected[kind]``, and its remote reads (``layers[kind]`` tables read)."""
    if (graph, parts) in TWO_RANKS and ranks == 2:
        out = str(request.getfixturevalue("two_ranks") / f"{graph}{parts}" / "out")
    else:
        root = request.getfixturevalue("tmp_path")
        job = _job(root, graph, parts)
        launch(_rank, ranks, ([job],), timeout=240)
        out = job[3]
    for kind, want_rows in expected.items():
        _check_kind(f"{out}.{kind}", want_rows, parts, ranks, layers[kind])
        _check_kind(f"{out}.{kind}{ON_DEVICE}", want_rows, parts, ranks, layers[kind])


def _check_kind(out: str, expected: dict[str, torch.Tensor], parts: int, ranks: int, layers: int) -> None:
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
def test_homogeneous_graphsage_equals_a_full_graph_forward(request, parts, ranks):
    g = small_homo()
    x = torch.from_numpy(g.node_feats["_N"]["feat"]).float()
    src, dst = g.edges[("_N", "_E", "_N")]
    model = _model(x.shape[1]).eval()
    with torch.no_grad():
        want = model(x, torch.from_numpy(np.stack([src, dst])).long())
    _check(request, "homo", {"sage": {"_N": want}}, parts, ranks, {"sage": 3})


@pytest.mark.parametrize("parts, ranks", [(2, 2), (1, 2), (4, 2)])
def test_heterogeneous_sage_equals_a_full_graph_forward(request, parts, ranks):
    g = small_hetero()
    x = _hetero_inputs(g)
    model = _model({t: int(v.shape[1]) for t, v in x.items()}, list(g.edges)).eval()
    with torch.no_grad():
        want = model(x, {et: torch.from_numpy(np.stack(g.edges[et])).long() for et in g.edges})
    _check(request, "hetero", {"sage": want}, parts, ranks, {"sage": 2})


def _with_loops_and_repeats(g: Graph) -> Graph:
    """``g`` with self-loops on some nodes (two on one) and a repeated edge: what GCN's and GAT's own
    self-loops must not count twice."""
    src, dst = g.edges[("_N", "_E", "_N")]
    loops = np.array([0, 5, 5, 17, 100])
    src, dst = np.concatenate([src, loops, src[:1]]), np.concatenate([dst, loops, dst[:1]])
    w = np.arange(src.shape[0], dtype=np.float32) / src.shape[0]
    return Graph.from_arrays(src, dst, g.num_nodes["_N"], node_feats=dict(g.node_feats["_N"]), edge_feats={"w": w})


@pytest.mark.parametrize("parts", [2, 4])
def test_homogeneous_models_equal_a_full_graph_forward(request, parts, ranks=2):
    g = _with_loops_and_repeats(small_homo())
    x = torch.from_numpy(g.node_feats["_N"]["feat"]).float()
    src, dst = g.edges[("_N", "_E", "_N")]
    w = torch.from_numpy(g.edge_feats[("_N", "_E", "_N")]["w"]).view(-1, 1)
    expected, layers = {}, {}
    for kind in HOMOGENEOUS:
        if kind == "sage":
            continue  # the test above
        model = _model(x.shape[1], kind=kind).eval()
        with torch.no_grad():
            extra = {"edge_attr": w} if HOMOGENEOUS[kind][1] else {}
            expected[kind] = {"_N": model(x, torch.from_numpy(np.stack([src, dst])).long(), **extra)}
        layers[kind] = model.num_layers
    _check(request, "models", expected, parts, ranks, layers)

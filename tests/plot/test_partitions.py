"""plot_partitions and the numbers behind it, checked against counts made directly from the original graph."""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from graphshard import Graph, InputError, load_partition_book, partition_graph
from graphshard.plot import partition_summary, plot_partitions
from graphshard.stats import partitioning_stats

from ..graphs import small_hetero, small_homo

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# (name, graph, parts, hops, method): "explicit" uses a random assignment given to partition_graph
CASES = [
    ("homo-random-3", "homo", 3, 1, "random"),
    ("homo-explicit-2", "homo", 2, 1, "explicit"),
    ("homo-random-2-hops2", "homo", 2, 2, "random"),
    ("hetero-random-3", "hetero", 3, 1, "random"),
    ("hetero-explicit-3", "hetero", 3, 1, "explicit"),
    ("hetero-random-2-hops2", "hetero", 2, 2, "random"),
]


@dataclass
class Case:
    graph: Graph
    config: Path
    num_parts: int
    hops: int
    owner: dict[str, np.ndarray]  # node type -> partition owning each original node


def _owners_from_assignment(g: Graph, assignment: np.ndarray) -> dict[str, np.ndarray]:
    bounds = np.cumsum([0] + [g.num_nodes[t] for t in g.ntypes])
    return {t: assignment[bounds[i] : bounds[i + 1]] for i, t in enumerate(g.ntypes)}


def _owners_from_mapping(g: Graph, nids, config: Path) -> dict[str, np.ndarray]:
    """Per-type new ID k is original node nids[t][k]; the book's ranges say who owns k."""
    nids = {"_N": nids} if g.is_homogeneous else nids
    book = load_partition_book(config)
    out = {}
    for t in g.ntypes:
        owner = np.empty(g.num_nodes[t], dtype=np.int64)
        owner[nids[t].numpy()] = book.nid2partid(np.arange(g.num_nodes[t]), t).numpy()
        out[t] = owner
    return out


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def case(request, tmp_path_factory) -> Case:
    _, kind, parts, hops, method = request.param
    g = small_homo() if kind == "homo" else small_hetero()
    out = tmp_path_factory.mktemp("parts")
    if method == "explicit":
        assignment = np.random.default_rng(7).integers(0, parts, g.total_nodes)
        partition_graph(g, "g", parts, out, num_hops=hops, part_method=assignment)
        owner = _owners_from_assignment(g, assignment)
    else:
        nids, _ = partition_graph(g, "g", parts, out, num_hops=hops, part_method=method, seed=5, return_mapping=True)
        owner = _owners_from_mapping(g, nids, out / "g.json")
    return Case(g, out / "g.json", parts, hops, owner)


def _edge_view(c: Case):
    """Per original edge (all types concatenated): owner of source, owner of destination, destination's
    in-degree over all edge types, and a graph-wide node ID of source and destination."""
    g = c.graph
    offset = dict(zip(g.ntypes, np.cumsum([0] + [g.num_nodes[t] for t in g.ntypes])))
    indeg = {t: np.zeros(g.num_nodes[t], dtype=np.int64) for t in g.ntypes}
    for (_, _, d), (_, dst) in g.edges.items():
        indeg[d] += np.bincount(dst, minlength=g.num_nodes[d])
    cols = [[], [], [], [], []]
    for (s, _, d), (src, dst) in g.edges.items():
        for col, values in zip(
            cols, (c.owner[s][src], c.owner[d][dst], indeg[d][dst], src + offset[s], dst + offset[d])
        ):
            col.append(values)
    return tuple(np.concatenate(col).astype(np.int64) for col in cols)


def test_cut_matrix_matches_original_edges(case):
    s = partition_summary(case.config)
    src_owner, dst_owner, _, _, _ = _edge_view(case)
    p = case.num_parts
    want = np.bincount(src_owner * p + dst_owner, minlength=p * p).reshape(p, p)
    np.fill_diagonal(want, 0)
    assert s.cut_matrix.shape == (p, p)
    np.testing.assert_array_equal(s.cut_matrix, want)
    assert s.edge_cut == int((src_owner != dst_owner).sum()) == partitioning_stats(case.config).edge_cut
    assert s.edge_cut > 0


def test_inner_counts_match_book_and_assignment(case):
    s = partition_summary(case.config)
    book = load_partition_book(case.config)
    p = case.num_parts
    owners = np.concatenate([case.owner[t] for t in case.graph.ntypes])
    _, dst_owner, _, _, _ = _edge_view(case)
    np.testing.assert_array_equal(s.inner_nodes, [book.partid2nids(i).numel() for i in range(p)])
    np.testing.assert_array_equal(s.inner_nodes, np.bincount(owners, minlength=p))
    np.testing.assert_array_equal(s.inner_edges, [book.partid2eids(i).numel() for i in range(p)])
    np.testing.assert_array_equal(s.inner_edges, np.bincount(dst_owner, minlength=p))
    assert (s.num_nodes, s.num_edges, s.num_parts, s.halo_hops) == (
        case.graph.total_nodes,
        case.graph.total_edges,
        p,
        case.hops,
    )


def test_halo_counts(case):
    s = partition_summary(case.config)
    stats = partitioning_stats(case.config)
    np.testing.assert_array_equal(s.halo_nodes, [ps.halo_nodes for ps in stats.parts])
    np.testing.assert_array_equal(s.inner_edges + s.halo_edges, [ps.local_edges for ps in stats.parts])
    if case.hops == 1:  # HALO nodes: the distinct sources of a partition's cut in-edges; no HALO edges
        src_owner, dst_owner, _, src, _ = _edge_view(case)
        cut = src_owner != dst_owner
        n = case.graph.total_nodes
        pairs = np.unique(dst_owner[cut] * n + src[cut])
        np.testing.assert_array_equal(s.halo_nodes, np.bincount(pairs // n, minlength=case.num_parts))
        assert not s.halo_edges.any()
    else:
        assert s.halo_edges.sum() > 0


def test_degree_histograms_match_original_in_degrees(case):
    s = partition_summary(case.config)
    src_owner, dst_owner, degree, _, _ = _edge_view(case)
    cut = src_owner != dst_owner
    length = len(s.cut_by_degree)
    assert len(s.kept_by_degree) == length == degree.max() + 1
    np.testing.assert_array_equal(s.cut_by_degree, np.bincount(degree[cut], minlength=length))
    np.testing.assert_array_equal(s.kept_by_degree, np.bincount(degree[~cut], minlength=length))
    assert s.cut_by_degree.sum() + s.kept_by_degree.sum() == case.graph.total_edges


def test_plot_writes_a_valid_png(case, tmp_path):
    from matplotlib.image import imread

    out = tmp_path / "sub" / "parts.png"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert plot_partitions(case.config, out, dpi=50) == out
    data = out.read_bytes()
    assert len(data) > 1000 and data.startswith(PNG_MAGIC)
    assert imread(out).shape[:2] == (9 * 50, 12 * 50)
    assert sorted(p.name for p in out.parent.iterdir()) == ["parts.png"]  # no temporary file left


def test_single_partition_and_other_formats(tmp_path):
    g = Graph.from_arrays([0, 1, 2, 3], [1, 2, 3, 0], 4)
    partition_graph(g, "one", 1, tmp_path / "p", part_method="random")
    s = partition_summary(tmp_path / "p" / "one.json")
    assert s.edge_cut == 0 and s.cut_matrix.tolist() == [[0]] and s.kept_by_degree.tolist() == [0, 4]
    out = plot_partitions(tmp_path / "p" / "one.json", tmp_path / "one.svg")
    assert out.read_text().lstrip().startswith("<?xml")
    with pytest.raises(InputError, match="one.nope"):
        plot_partitions(tmp_path / "p" / "one.json", tmp_path / "one.nope")
    assert not (tmp_path / "one.nope").exists()


def test_missing_matplotlib_is_a_clear_error(tmp_path, monkeypatch):
    for name in ("matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(InputError, match=r"matplotlib.*graphshard\[plot\]"):
        plot_partitions(tmp_path / "absent.json", tmp_path / "x.png")


def test_the_bar_legends_cover_no_bar():
    """The legend of the stacked bars once sat over them ("lower right"): drawn, no legend box meets a bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from graphshard.plot.partitions import _stacked

    fig, ax = plt.subplots(figsize=(6, 4))
    inner, halo = np.array([900, 1000, 950, 980]), np.array([300, 250, 320, 280])
    _stacked(ax, inner, halo, "nodes", title="nodes per partition")
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    bars = [p.get_window_extent() for p in ax.patches]
    assert bars and not any(legend.overlaps(b) for b in bars)
    plt.close(fig)

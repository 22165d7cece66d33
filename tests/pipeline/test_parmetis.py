"""ParMETIS interop: exported files against the graph; import of outputs synthesised from a known assignment."""

from __future__ import annotations

import numpy as np
import pytest

from graphshard import InputError
from graphshard.chunked.writer import chunk_graph
from graphshard.pipeline.assignment_files import read_assignment
from graphshard.pipeline.parmetis import export_parmetis, import_parmetis
from tests.graphs import small_hetero


def test_export_layout(tmp_path):
    g = small_hetero()
    chunk_graph(g, tmp_path / "c", 2, "csv", graph_name="h")
    nodes, edges, stats = export_parmetis(tmp_path / "c", tmp_path / "pm")
    n = np.loadtxt(nodes, dtype=np.int64, ndmin=2)
    assert n.shape == (g.total_nodes, 1 + 4 + 1)
    offsets = np.cumsum([0] + [g.num_nodes[t] for t in g.ntypes])
    for ti, t in enumerate(g.ntypes):
        block = n[offsets[ti] : offsets[ti + 1]]
        assert (block[:, 0] == ti).all() and (block[:, 1 + ti] == 1).all() and block[:, 1:5].sum() == len(block)
        assert block[:, -1].tolist() == list(range(g.num_nodes[t]))
    e = np.loadtxt(edges, dtype=np.int64, ndmin=2)
    assert e.shape == (g.total_edges, 4)
    row = 0
    for r, et in enumerate(g.canonical_etypes):
        s, d = g.edges[et]
        block = e[row : row + len(s)]
        assert (block[:, 3] == r).all() and block[:, 2].tolist() == list(range(len(s)))
        assert np.array_equal(block[:, 0], s + offsets[g.ntypes.index(et[0])])
        assert np.array_equal(block[:, 1], d + offsets[g.ntypes.index(et[2])])
        row += len(s)
    assert stats.read_text().split() == [str(g.total_nodes), str(g.total_edges), "4"]


def _synthesise(tmp_path, g, assignment, ranks=3):
    """ParMETIS-style outputs: each rank's file lists some nodes with their partition, shuffled."""
    offsets = np.cumsum([0] + [g.num_nodes[t] for t in g.ntypes])
    ntype = np.searchsorted(offsets, np.arange(g.total_nodes), side="right") - 1
    weights = np.eye(len(g.ntypes), dtype=np.int64)[ntype]
    rows = np.column_stack(
        [np.arange(g.total_nodes), ntype, weights, np.arange(g.total_nodes) - offsets[ntype], assignment]
    )
    rows = rows[np.random.default_rng(0).permutation(len(rows))]
    out = tmp_path / "pmout"
    out.mkdir()
    for i, block in enumerate(np.array_split(rows, ranks)):
        np.savetxt(out / f"p{i}-h_nodes.txt", block, fmt="%d")
    return out


def test_import_recovers_known_assignment(tmp_path):
    g = small_hetero()
    chunk_graph(g, tmp_path / "c", 2, "numpy", graph_name="h")
    assignment = np.random.default_rng(1).integers(0, 3, g.total_nodes)
    out = _synthesise(tmp_path, g, assignment)
    import_parmetis(tmp_path / "c", out, tmp_path / "a", num_parts=3)
    per_type, parts = read_assignment(tmp_path / "a", g.num_nodes)
    assert parts == 3
    assert np.array_equal(np.concatenate([per_type[t] for t in g.ntypes]), assignment)


def test_import_errors(tmp_path):
    g = small_hetero()
    chunk_graph(g, tmp_path / "c", 2, "numpy", graph_name="h")
    out = _synthesise(tmp_path, g, np.zeros(g.total_nodes, np.int64))
    first = out / "p0-h_nodes.txt"
    lines = first.read_text().splitlines()
    first.write_text("\n".join(lines[1:]) + "\n")
    with pytest.raises(InputError, match="1 nodes have no partition"):
        import_parmetis(tmp_path / "c", out, tmp_path / "a")
    bad = lines[0].split()
    bad[-2] = "999"
    first.write_text("\n".join([" ".join(bad)] + lines[1:]) + "\n")
    with pytest.raises(InputError, match=r"p0-h_nodes.txt, line 1: per-type ID does not match"):
        import_parmetis(tmp_path / "c", out, tmp_path / "a")

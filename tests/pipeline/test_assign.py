"""Step 1: assignment files for a chunked graph."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphshard import InputError
from graphshard.chunked.writer import chunk_graph
from graphshard.datasets import community_graph
from graphshard.pipeline.assign import assign_chunked
from graphshard.pipeline.assignment_files import read_assignment
from tests.graphs import small_hetero


def test_random_exactly_balanced_per_type(tmp_path):
    g = small_hetero()
    chunk_graph(g, tmp_path / "c", 2, "numpy")
    assign_chunked(tmp_path / "c", tmp_path / "a", 3, "random")
    meta = json.loads((tmp_path / "a/partition_meta.json").read_text())
    assert meta["method"] == "random" and meta["num_parts"] == 3 and meta["version"] == 1
    per_type, parts = read_assignment(tmp_path / "a", g.num_nodes)
    assert parts == 3
    for t, a in per_type.items():
        lines = (tmp_path / f"a/{t}.txt").read_text().split()
        assert [int(x) for x in lines] == a.tolist()
        counts = np.bincount(a, minlength=3)
        assert counts.max() - counts.min() <= 1


def test_metis_reads_structure_only_and_cuts_less(tmp_path):
    ds = community_graph(num_nodes=3000, num_classes=4, avg_degree=10, intra=0.9, seed=0)
    chunk_graph(ds.graph, tmp_path / "c", 3, "parquet")
    for f in (tmp_path / "c" / "node_data").rglob("*.parquet"):
        f.write_bytes(b"garbage: metis must never read features")
    assign_chunked(tmp_path / "c", tmp_path / "a", 4, "metis", fmt="npy")
    a, _ = read_assignment(tmp_path / "a", {"_N": 3000})
    src, dst = ds.graph.edges[("_N", "_E", "_N")]
    assert np.mean(a["_N"][src] != a["_N"][dst]) < 0.3


def test_assignment_file_errors(tmp_path):
    (tmp_path / "paper.txt").write_text("0\n1\nz\n")
    with pytest.raises(InputError, match=r"paper.txt, line 3: 'z' is not a partition ID"):
        read_assignment(tmp_path, {"paper": 3})
    (tmp_path / "paper.txt").write_text("0\n1\n")
    with pytest.raises(InputError, match="paper.txt: 2 entries, but node type 'paper' has 3 nodes"):
        read_assignment(tmp_path, {"paper": 3})
    (tmp_path / "paper.txt").write_text("0\n1\n5\n")
    with pytest.raises(InputError, match=r"paper.txt, line 3: partition 5 is outside \[0, 2\)"):
        read_assignment(tmp_path, {"paper": 3}, num_parts=2)
    with pytest.raises(InputError, match="no assignment file for node type 'author'"):
        read_assignment(tmp_path, {"author": 3})
    (tmp_path / "paper.txt").unlink()
    np.save(tmp_path / "paper.npy", np.array([0, 2**64 - 1, 1], dtype=np.uint64))  # int64 would make it -1
    with pytest.raises(InputError, match=r"paper.npy, line 2: partition 18446744073709551615 does not fit"):
        read_assignment(tmp_path, {"paper": 3})

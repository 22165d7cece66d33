"""Dispatch on W local ranks equals partition_graph with the same assignment, byte for byte."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphshard import partition_graph
from graphshard.chunked.writer import chunk_graph
from graphshard.pipeline.assign import assign_chunked
from graphshard.pipeline.assignment_files import read_assignment
from graphshard.pipeline.dispatch import DispatchOptions, run_dispatch
from tests.graphs import small_hetero, small_homo


def _files(root):
    return {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _compare(reference, dispatched, name):
    a, b = _files(reference), _files(dispatched)
    assert sorted(a) == sorted(b)
    for rel in a:
        if rel.name == f"{name}.json":
            ja, jb = json.loads(a[rel]), json.loads(b[rel])
            ja.pop("part_method"), jb.pop("part_method")
            assert ja == jb
        else:
            assert a[rel] == b[rel], f"{rel} differs"


def _run(tmp_path, g, chunks, parts, ranks, hops=1, fmt="numpy", orig=True, feat_dtype=None):
    chunk_graph(g, tmp_path / "chunked", chunks, fmt, graph_name="g")
    assign_chunked(tmp_path / "chunked", tmp_path / "assign", parts, "random", seed=3)
    per_type, _ = read_assignment(tmp_path / "assign", g.num_nodes)
    explicit = np.concatenate([per_type[t] for t in g.ntypes])
    partition_graph(
        g, "g", parts, tmp_path / "ref", num_hops=hops, part_method=explicit, save_orig_ids=orig, feat_dtype=feat_dtype
    )
    opts = DispatchOptions(
        tmp_path / "chunked", tmp_path / "assign", tmp_path / "out", hops, orig, orig, feat_dtype=feat_dtype
    )
    run_dispatch(opts, num_procs=ranks, timeout=60)
    _compare(tmp_path / "ref", tmp_path / "out", "g")


@pytest.mark.parametrize("chunks,parts,ranks", [(4, 4, 4), (8, 4, 2), (9, 6, 3), (1, 4, 2), (11, 4, 1)])
def test_hetero_with_features_equals_partition_graph(tmp_path, chunks, parts, ranks):
    _run(tmp_path, small_hetero(), chunks, parts, ranks, hops=2 if parts == 6 else 1)


@pytest.mark.parametrize("feat_dtype", ["float16", "bfloat16"])
def test_reduced_precision_features_equal_partition_graph(tmp_path, feat_dtype):
    """Compact structure and 16-bit features: the two writers still agree byte for byte."""
    _run(tmp_path, small_hetero(), 4, 3, 2, hops=2, feat_dtype=feat_dtype)
    cfg = json.loads((tmp_path / "out" / "g.json").read_text())
    assert cfg["feat_dtype"] == feat_dtype
    code = {"float16": "F16", "bfloat16": "BF16"}[feat_dtype]
    assert cfg["feature_schema"]["node_feats"]["paper/feat"]["dtype"] == code


@pytest.mark.parametrize("hops", [1, 2])
def test_homogeneous_featureless_equals_partition_graph(tmp_path, hops):
    g = small_homo()
    g.node_feats, g.edge_feats = {}, {}
    _run(tmp_path, g, 3, 3, 2, hops=hops, fmt="csv", orig=False)


def test_runs_unchanged_under_torchrun(tmp_path):
    """The same command under torchrun (2 ranks) writes the same bytes as the local launcher."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    torchrun = Path(sys.executable).with_name("torchrun")
    graphshard = Path(sys.executable).with_name("graphshard")
    if not torchrun.exists() or not graphshard.exists():
        pytest.skip("torchrun / graphshard console scripts not installed next to this Python")
    g = small_hetero()
    chunk_graph(g, tmp_path / "c", 3, "numpy", graph_name="g")
    assign_chunked(tmp_path / "c", tmp_path / "a", 3, "random")
    run_dispatch(DispatchOptions(tmp_path / "c", tmp_path / "a", tmp_path / "local", 2), num_procs=2, timeout=60)
    res = subprocess.run(
        [
            str(torchrun),
            "--standalone",
            "--nproc-per-node",
            "2",
            str(graphshard),
            "dispatch",
            "--in-dir",
            str(tmp_path / "c"),
            "--partitions-dir",
            str(tmp_path / "a"),
            "--out-dir",
            str(tmp_path / "tr"),
            "--num-hops",
            "2",
            "--timeout",
            "60",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    _compare(tmp_path / "local", tmp_path / "tr", "g")
    shutil.rmtree(tmp_path / "tr")

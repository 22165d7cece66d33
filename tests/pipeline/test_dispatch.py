"""Dispatch on W local ranks equals partition_graph with the same assignment, byte for byte."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphshard import partition_graph
from graphshard.chunked.writer import chunk_graph
from graphshard.distributed.ranks.launcher import launch
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


def _prepare(root, g, chunks, parts, hops=1, fmt="numpy", orig=True, feat_dtype=None) -> DispatchOptions:
    """``g`` chunked into ``root/chunked``, assigned to ``parts`` partitions and partitioned with that assignment
    by partition_graph into ``root/ref``: the options that dispatch it into ``root/out``."""
    chunk_graph(g, root / "chunked", chunks, fmt, graph_name="g")
    assign_chunked(root / "chunked", root / "assign", parts, "random", seed=3)
    per_type, _ = read_assignment(root / "assign", g.num_nodes)
    explicit = np.concatenate([per_type[t] for t in g.ntypes])
    partition_graph(
        g, "g", parts, root / "ref", num_hops=hops, part_method=explicit, save_orig_ids=orig, feat_dtype=feat_dtype
    )
    return DispatchOptions(
        root / "chunked",
        root / "assign",
        root / "out",
        hops,
        save_orig_nids=orig,
        save_orig_eids=orig,
        feat_dtype=feat_dtype,
    )


def _featureless_homo():
    g = small_homo()
    g.node_feats, g.edge_feats = {}, {}
    return g


# every 2-rank case of the tests below (name: graph, chunks, parts, options): all dispatched in one launch of
# 2 ranks, one after the other (a launch costs seconds of start-up); the others go through run_dispatch
TWO_RANKS = {
    "hetero-8-4": (small_hetero, 8, 4, {}),
    "hetero-1-4": (small_hetero, 1, 4, {}),
    **{dtype: (small_hetero, 4, 3, {"hops": 2, "feat_dtype": dtype}) for dtype in ("float16", "bfloat16")},
    **{f"homo-{hops}": (_featureless_homo, 3, 3, {"hops": hops, "fmt": "csv", "orig": False}) for hops in (1, 2)},
}


def _dispatch_all(jobs: list[DispatchOptions]) -> None:
    """One rank: every dispatch of ``jobs`` in turn (each as run_dispatch's ranks run one)."""
    from graphshard.distributed.ranks.context import DistContext
    from graphshard.pipeline.dispatch import dispatch

    with DistContext.from_env(timeout=60) as ctx:
        for opts in jobs:
            dispatch(opts, ctx)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    root = tmp_path_factory.mktemp("two-ranks")
    jobs = [_prepare(root / name, make(), chunks, parts, **kw) for name, (make, chunks, parts, kw) in TWO_RANKS.items()]
    launch(_dispatch_all, 2, (jobs,), timeout=240)
    return root


def _dispatched(request, name: str, ranks: int, make, chunks: int, parts: int, **kw):
    """The directory of case ``name``, dispatched (on ``ranks`` ranks) and compared with partition_graph's."""
    if ranks == 2:
        assert TWO_RANKS[name] == (make, chunks, parts, kw)
        root = request.getfixturevalue("two_ranks") / name
    else:
        root = request.getfixturevalue("tmp_path")
        run_dispatch(_prepare(root, make(), chunks, parts, **kw), num_procs=ranks, timeout=60)
    _compare(root / "ref", root / "out", "g")
    return root


@pytest.mark.parametrize("chunks,parts,ranks", [(4, 4, 4), (8, 4, 2), (9, 6, 3), (1, 4, 2), (11, 4, 1)])
def test_hetero_with_features_equals_partition_graph(request, chunks, parts, ranks):
    kw = {"hops": 2} if parts == 6 else {}
    _dispatched(request, f"hetero-{chunks}-{parts}", ranks, small_hetero, chunks, parts, **kw)


@pytest.mark.parametrize("feat_dtype", ["float16", "bfloat16"])
def test_reduced_precision_features_equal_partition_graph(request, feat_dtype):
    """Compact structure and 16-bit features: the two writers still agree byte for byte."""
    root = _dispatched(request, feat_dtype, 2, small_hetero, 4, 3, hops=2, feat_dtype=feat_dtype)
    cfg = json.loads((root / "out" / "g.json").read_text())
    assert cfg["feat_dtype"] == feat_dtype
    code = {"float16": "F16", "bfloat16": "BF16"}[feat_dtype]
    assert cfg["feature_schema"]["node_feats"]["paper/feat"]["dtype"] == code


@pytest.mark.parametrize("hops", [1, 2])
def test_homogeneous_featureless_equals_partition_graph(request, hops):
    _dispatched(request, f"homo-{hops}", 2, _featureless_homo, 3, 3, hops=hops, fmt="csv", orig=False)


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


def test_float16_features_beyond_its_range_are_refused(tmp_path):
    """Out of core as in memory: a feature float16 cannot hold (1e6 > 65504) is refused naming the feature and
    bfloat16, and nothing is published."""
    g = small_homo()
    g.node_feats["_N"]["feat"] = np.asarray(g.node_feats["_N"]["feat"], dtype=np.float32) * 1.0e6
    chunk_graph(g, tmp_path / "c", 2, "numpy", graph_name="g")
    assign_chunked(tmp_path / "c", tmp_path / "a", 2, "random")
    opts = DispatchOptions(tmp_path / "c", tmp_path / "a", tmp_path / "out", feat_dtype="float16")
    with pytest.raises(Exception, match=r"feature '_N/feat' holds values up to .*bfloat16"):
        run_dispatch(opts, num_procs=2, timeout=60)
    assert not (tmp_path / "out" / "g.json").exists()

"""Dispatch robustness: a failing rank is named, a dead rank stops the others, interrupted runs resume."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

from graphshard import partition_graph
from graphshard.chunked.writer import chunk_graph
from graphshard.distributed.ranks.context import DistContext, DistError
from graphshard.distributed.ranks.launcher import launch
from graphshard.pipeline.assign import assign_chunked
from graphshard.pipeline.assignment_files import read_assignment
from graphshard.pipeline.dispatch import DispatchOptions, dispatch, run_dispatch
from graphshard.pipeline.dispatch.write import PartWriter
from tests.graphs import small_hetero


@pytest.fixture
def prepared(tmp_path):
    g = small_hetero()
    chunk_graph(g, tmp_path / "c", 4, "numpy", graph_name="g")
    assign_chunked(tmp_path / "c", tmp_path / "a", 4, "random")
    return g, DispatchOptions(
        tmp_path / "c", tmp_path / "a", tmp_path / "out", 2, save_orig_nids=True, save_orig_eids=True
    )


def _faulty(opts, mode, rank_to_fail, part_to_fail):
    """Runs in a spawned rank: dispatch with one injected fault."""
    rank = int(os.environ["RANK"])
    original = PartWriter.write_structure

    def write(self, p, *args, **kwargs):
        if mode == "raise" and p == part_to_fail:
            raise OSError(f"disk full while writing partition {p}")
        if mode == "die" and rank == rank_to_fail:
            os._exit(3)
        return original(self, p, *args, **kwargs)

    PartWriter.write_structure = write
    with DistContext.from_env(timeout=20) as ctx:
        dispatch(opts, ctx)


def test_failing_rank_is_named_and_rerun_resumes(prepared, tmp_path):
    g, opts = prepared
    with pytest.raises(DistError, match=r"rank 1 failed[\s\S]*disk full while writing partition 3"):
        launch(_faulty, 2, (opts, "raise", 1, 3), timeout=20)
    out = tmp_path / "out"
    assert not (out / "g.json").exists(), "an interrupted run must not leave a complete-looking config"
    resume = out / ".dispatch-g"
    done = sorted(p.name for p in resume.glob("part*.done.json"))
    assert "part3.done.json" not in done and done, done
    kept = {
        p: (resume / f"part{p}" / "graph.safetensors").stat().st_ino
        for p in (0, 1, 2)
        if (resume / f"part{p}.done.json").exists()
    }
    run_dispatch(opts, num_procs=2, timeout=30)
    for p, inode in kept.items():  # finished partitions were reused, not rebuilt
        assert (out / f"part{p}" / "graph.safetensors").stat().st_ino == inode
    per_type, _ = read_assignment(tmp_path / "a", g.num_nodes)
    partition_graph(
        g,
        "g",
        4,
        tmp_path / "ref",
        num_hops=2,
        save_orig_ids=True,
        part_method=np.concatenate([per_type[t] for t in g.ntypes]),
    )
    for f in (tmp_path / "ref").rglob("*.safetensors"):
        assert f.read_bytes() == (out / f.relative_to(tmp_path / "ref")).read_bytes()
    assert (
        json.loads((out / "g.json").read_text())["checksums"]
        == json.loads((tmp_path / "ref" / "g.json").read_text())["checksums"]
    )
    assert not resume.exists()


def test_dead_rank_stops_the_others(prepared):
    _, opts = prepared
    start = time.monotonic()
    with pytest.raises(DistError, match="rank 1 exited with code 3 without reporting an error"):
        launch(_faulty, 2, (opts, "die", 1, -1), timeout=20)
    assert time.monotonic() - start < 60


def test_bad_chunk_read_by_one_rank_names_it(prepared, tmp_path):
    _, opts = prepared
    victim = tmp_path / "c" / "edges" / "paper__cites__paper" / "chunk-3.npy"
    np.save(victim, np.full(np.load(victim).shape, 10**6))  # same row count: only its reader notices
    with pytest.raises(DistError, match=r"rank 1 failed[\s\S]*chunk-3.npy, line 1: source ID 1000000 is out of range"):
        run_dispatch(opts, num_procs=2, timeout=20)

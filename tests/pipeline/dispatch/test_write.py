"""Writing: partition 1 of the tiny graph (1-hop HALO) staged and finished, then read back file by file."""

from __future__ import annotations

import errno
import hashlib
from dataclasses import replace

import numpy as np
import pytest

from graphshard.errors import WriteError
from graphshard.format.tensorfile import read_tensors
from graphshard.partition.halo import HaloInEdges
from graphshard.partition.homogenize import HomoView
from graphshard.partition.relabel import Relabelling, edge_bounds_from_counts
from graphshard.pipeline.dispatch import write as write_module
from graphshard.pipeline.dispatch.edge_exchange import PartEdges
from graphshard.pipeline.dispatch.halo import own_structure
from graphshard.pipeline.dispatch.publish import config_template
from graphshard.pipeline.dispatch.resume import ResumeArea
from graphshard.pipeline.dispatch.state import DispatchState
from graphshard.pipeline.dispatch.write import PartWriter
from tests.pipeline.dispatch.conftest import EDGE_COUNTS, one_rank


@pytest.fixture
def setup(tiny):
    state = DispatchState.load(replace(tiny, num_hops=1), one_rank(1, 2))
    rl = Relabelling(
        2,
        state.new2old,
        state.old2new,
        np.zeros(0, np.int64),
        node_bounds=state.node_bounds,
        edge_bounds=edge_bounds_from_counts(np.array(EDGE_COUNTS)),
    )
    identity = config_template(state, rl, state.out / "t.json")
    resume = ResumeArea(state.out / ".dispatch-t", "fp")
    resume.root.mkdir(parents=True)
    # partition 1's edges as received: 0 (a0->b1), 2 (a1->b1), 4 (b0->a0), 6 (b1->a2), homogeneous node IDs
    edges = PartEdges(
        np.array([0, 2, 4, 6], np.int32),
        np.array([0, 1, 3, 4], np.int32),
        np.array([4, 4, 0, 2], np.int32),
        {"a:x:b/w": np.array([10.0, 12.0])},
    )
    node_feats = {"a/f": np.array([[0, 1], [4, 5]], np.float32)}
    return state, rl, identity, resume, PartWriter(state, resume, identity), edges, node_feats


def _read(path, identity, kind):
    return {k: v.numpy().tolist() for k, v in read_tensors(path, identity.identity(1, kind)).items()}


def test_feature_files_load_back_with_identity_and_checksums(setup):
    state, rl, identity, resume, writer, edges, node_feats = setup
    sums = writer.write_features(1, edges, rl, node_feats)
    staged = resume.staging_dir(1)
    assert _read(staged / "node_feats.safetensors", identity, "node_feats") == {"a/f": [[0.0, 1.0], [4.0, 5.0]]}
    assert _read(staged / "edge_feats.safetensors", identity, "edge_feats") == {"a:x:b/w": [10.0, 12.0]}
    # original per-type IDs: nodes a0, a2, b1; edges x 0, 2 and y 0 (edge 4), 2 (edge 6)
    assert _read(staged / "orig_nids.safetensors", identity, "orig_nids") == {"a": [0, 2], "b": [1]}
    assert _read(staged / "orig_eids.safetensors", identity, "orig_eids") == {"a:x:b": [0, 2], "b:y:a": [0, 2]}
    assert sorted(sums) == [f"part1/{n}.safetensors" for n in ("edge_feats", "node_feats", "orig_eids", "orig_nids")]
    for rel, digest in sums.items():
        assert hashlib.sha256((staged / rel.split("/")[1]).read_bytes()).hexdigest() == digest
    assert edges.feats == {}  # released once written


def test_structure_loads_back_and_the_partition_is_finished(setup):
    state, rl, identity, resume, writer, edges, node_feats = setup
    sums = writer.write_features(1, edges, rl, node_feats)
    view = HomoView(5, state.node_off, state.edge_off, np.zeros(0, np.int64), dst=np.zeros(0, np.int64))
    own = own_structure(state, 1, edges, 3)
    writer.write_structure(1, edges, rl, view, own=own, halo=(HaloInEdges.empty(), np.zeros(0, np.int64)), sums=sums)
    g = _read(resume.part_dir(1) / "graph.safetensors", identity, "part_graph")
    # inner a0, a2, b1 (new 2-4), then the HALO sources a1, b0 (new 0, 1)
    assert g["node/_ID"] == [2, 3, 4, 0, 1] and g["node/part_id"] == [1, 1, 1, 0, 0]
    assert g["node/orig_id"] == [0, 2, 1, 1, 0] and g["node/_TYPE"] == [0, 0, 1, 0, 1]
    # in-edges of a0 (b0, edge 4 = new 5), a2 (b1, 6 = new 6), b1 (a0, 0 = new 3; a1, 2 = new 4); none
    # of the HALO nodes (1 hop)
    assert g["indptr"] == [0, 1, 2, 4, 4, 4] and g["indices"] == [4, 2, 0, 3]
    assert g["edge/_ID"] == [5, 6, 3, 4] and g["edge/orig_id"] == [0, 2, 0, 2] and g["edge/_TYPE"] == [1, 1, 0, 0]
    assert not resume.staging_dir(1).exists()
    assert resume.reusable(1, rank=1)
    assert resume.read_marker(1)["files"] == ["edge_feats", "node_feats", "orig_eids", "orig_nids", "part_graph"]


def test_failed_write_names_the_file_and_removes_the_staging(setup, monkeypatch):
    state, rl, identity, resume, writer, edges, node_feats = setup
    real, calls = write_module.write_tensors, []

    def full(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 2:  # node_feats is written, edge_feats finds the disk full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(write_module, "write_tensors", full)
    with pytest.raises(WriteError, match=r"part1\.tmp-\d+/edge_feats\.safetensors: No space left on device"):
        writer.write_features(1, edges, rl, node_feats)
    assert not resume.staging_dir(1).exists() and not resume.marker(1).exists()

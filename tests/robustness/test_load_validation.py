"""Corrupt or inconsistent partitions are refused at load (by default), naming the file; never trusted."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from graphshard import FormatError, InputError, load_partition, partition_graph
from graphshard.format.load import verify_checksums
from graphshard.sampling.neighbor import CSCGraph, sample_neighbors
from tests.format.tamper import rewrite
from tests.graphs import small_hetero, small_homo


@pytest.fixture
def parts(tmp_path):
    partition_graph(small_hetero(), "h", 3, tmp_path / "p", part_method="random", num_hops=1)
    return tmp_path / "p"


def _json(parts, change):
    cfg = parts / "h.json"
    raw = json.loads(cfg.read_text())
    change(raw)
    cfg.write_text(json.dumps(raw))


def _swap(a, b, config):
    tmp = a.with_suffix(".tmp")
    shutil.move(a, tmp), shutil.move(b, a), shutil.move(tmp, b)
    raw = json.loads(config.read_text())
    sums = raw["checksums"]
    ka, kb = (str(x.relative_to(config.parent)) for x in (a, b))
    sums[ka], sums[kb] = sums[kb], sums[ka]  # checksums follow the files: verify=True alone would pass
    config.write_text(json.dumps(raw))


def test_feature_files_swapped_between_partitions(parts):
    _swap(parts / "part0" / "node_feats.safetensors", parts / "part1" / "node_feats.safetensors", parts / "h.json")
    verify_checksums(parts / "h.json")
    with pytest.raises(FormatError, match=r"part0/node_feats.safetensors: this file belongs to another partition .*"
                                          r"part_id='1'.*expects part_id='0'"):
        load_partition(parts / "h.json", 0)


def test_file_from_another_graph_is_refused(parts, tmp_path):
    partition_graph(small_hetero(seed=1), "h", 3, tmp_path / "other", part_method="random")
    shutil.copy(tmp_path / "other" / "part2" / "graph.safetensors", parts / "part2" / "graph.safetensors")
    with pytest.raises(FormatError, match=r"part2/graph.safetensors: this file belongs to another .*run_fingerprint"):
        load_partition(parts / "h.json", 2, load_feats=False)


def test_maps_retiled_consistently_but_wrongly(parts):
    def shift(raw):  # move one node of the first type from partition 0 to partition 1: still a valid tiling
        first = next(iter(raw["node_map"]))
        t_last = list(raw["node_map"])[-1]
        raw["node_map"][first][0][1] -= 1
        for t in raw["node_map"]:
            if t != first:
                raw["node_map"][t][0] = [x - 1 for x in raw["node_map"][t][0]]
        raw["node_map"][first][1][0] -= 1
    _json(parts, shift)
    with pytest.raises(FormatError, match="no longer match 'run_fingerprint'"):
        load_partition(parts / "h.json", 0)
    _json(parts, lambda raw: raw.pop("run_fingerprint"))  # as another tool would write it: structure still checked
    with pytest.raises(FormatError, match=r"part0/graph.safetensors: inner nodes must be the local prefix"):
        load_partition(parts / "h.json", 0)


def test_edge_map_retiled(parts):
    def shift(raw):
        raw.pop("run_fingerprint")
        et = next(iter(raw["edge_map"]))
        raw["edge_map"][et][0][1] -= 1
        for t in list(raw["edge_map"])[1:]:
            raw["edge_map"][t][0] = [x - 1 for x in raw["edge_map"][t][0]]
        raw["edge_map"][et][1][0] -= 1
    _json(parts, shift)
    with pytest.raises(FormatError, match=r"part0/graph.safetensors: holds \d+ in-edges of inner nodes, but the config"):
        load_partition(parts / "h.json", 0)


def test_halo_hops_not_matching_the_files(tmp_path):
    partition_graph(small_homo(), "g", 2, tmp_path, part_method="random", num_hops=2)
    raw = json.loads((tmp_path / "g.json").read_text())
    raw["halo_hops"] = 1
    raw.pop("run_fingerprint")
    (tmp_path / "g.json").write_text(json.dumps(raw))
    with pytest.raises(FormatError, match=r"part0/graph.safetensors: stores \d+ in-edges of HALO nodes, but the "
                                          "config says halo_hops = 1"):
        load_partition(tmp_path / "g.json", 0)


@pytest.mark.parametrize("tensor, change, message", [
    ("indices", lambda a: a.__setitem__(0, a.shape[0] * 10), r"'indices' holds a local node ID outside .*value \d+"),
    ("indices", lambda a: a.__setitem__(0, -1), r"'indices' holds a local node ID outside .*value -1"),
    ("node/part_id", lambda a: a.__setitem__(-1, (a[-1] + 1) % 3), "node/part_id differs from the owner"),
    ("node/_TYPE", lambda a: a.__setitem__(0, (a[0] + 1) % 4), "node/_TYPE differs"),
    ("edge/inner_edge", lambda a: a.__setitem__(0, False), "edge/inner_edge is false for an in-edge of an inner node"),
    ("edge/_ID", lambda a: a.__setitem__(0, 10**9), r"inner edge/_ID outside this partition's range"),
    ("edge/_TYPE", lambda a: a.__setitem__(0, (a[0] + 1) % 4), "edge/_TYPE differs"),
    ("indptr", lambda a: a.__setitem__(1, a[2] + 1), "'indptr' decreases"),
])
def test_inconsistent_file_with_updated_checksum(parts, tensor, change, message):
    path = parts / "part1" / "graph.safetensors"
    rewrite(path, lambda t: change(t[tensor]), config=parts / "h.json")
    verify_checksums(parts / "h.json")  # the checksum pass alone accepts it
    with pytest.raises(FormatError, match=f"part1/graph.safetensors: {message}"):
        load_partition(parts / "h.json", 1, verify=True)


def test_wrong_dtype_is_refused(parts):
    rewrite(parts / "part0" / "graph.safetensors", lambda t: t.update({"node/_TYPE": t["node/_TYPE"].astype(np.int32)}))
    with pytest.raises(FormatError, match="'node/_TYPE' has dtype torch.int32, expected torch.int64"):
        load_partition(parts / "h.json", 0)


def test_feature_dtype_differs_between_partitions(parts):
    rewrite(parts / "part2" / "node_feats.safetensors",
            lambda t: t.update({"paper/feat": t["paper/feat"].astype(np.float64)}))
    with pytest.raises(FormatError, match=r"part0/node_feats.safetensors and .*part2/node_feats.safetensors disagree "
                                          r"on feature 'paper/feat'"):
        load_partition(parts / "h.json", 0)


def test_huge_map_value_is_a_format_error(parts):
    _json(parts, lambda raw: raw["node_map"][next(iter(raw["node_map"]))][0].__setitem__(1, 2**70))
    with pytest.raises(FormatError, match=r"h.json: node_map\['paper'\] must be a list of \[start, end\] pairs of 64-bit"):
        load_partition(parts / "h.json", 0)
    _json(parts, lambda raw: raw.__setitem__("num_nodes", 2**70))
    with pytest.raises(FormatError, match="key 'num_nodes' must be an integer"):
        load_partition(parts / "h.json", 0)


@pytest.mark.parametrize("bad", [10**6, -1])
def test_sampler_refuses_out_of_bounds_structure(bad):
    """The compiled kernels trust the bounds: they are checked once, at the boundary (this used to segfault)."""
    indptr = np.array([0, 2, 3, 4], dtype=np.int64)
    indices = np.array([1, bad, 0, 1], dtype=np.int64)
    with pytest.raises(InputError, match=rf"indices\[1\] = {bad} is not a node ID in \[0, 3\)"):
        sample_neighbors(CSCGraph(indptr, indices), np.array([0]), [2, 2])
    with pytest.raises(InputError, match="indptr decreases at node 1"):
        CSCGraph(np.array([0, 3, 2, 4], dtype=np.int64), np.array([0, 1, 2, 0], dtype=np.int64))


def test_distributed_sampling_graph_refuses_bad_structure(parts):
    from graphshard.dist.sampling_graph import LocalSamplingGraph
    import torch
    part = load_partition(parts / "h.json", 0, load_feats=False)
    bad = part.graph.indices.clone()
    bad[0] = -5
    graph = type(part.graph)(part.graph.indptr, bad, part.graph.ndata, part.graph.edata)
    with pytest.raises(InputError, match=r"partition 0: indices\[0\] = -5"):
        LocalSamplingGraph(graph, part.partition_book, 0)
    assert torch.equal(part.graph.indices, load_partition(parts / "h.json", 0, load_feats=False).graph.indices)

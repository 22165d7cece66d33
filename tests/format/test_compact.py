"""Compact partitions: structure tensors in the smallest integer type that holds their values (int32 IDs, int8
type IDs) but the per-node ``indptr`` and ``node/_ID``, stored int64 so that they are mapped, not widened into
each process's memory; int64 and int32-indptr partitions of older runs still loading; features stored as
float16 or bfloat16 on request."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from graphshard import load_partition, load_partition_feats, partition_graph
from graphshard.format import dtypes
from graphshard.format.tensorfile import read_header
from graphshard.limits import smallest_int
from graphshard.partition import build
from tests.graphs import small_hetero, small_homo

ID_KEYS = ("indices", "node/orig_id", "edge/_ID", "edge/orig_id")
WIDE_KEYS = ("indptr", "node/_ID")  # read as int64 by every consumer: stored so
SMALL_KEYS = ("node/part_id", "node/_TYPE", "edge/_TYPE")


def test_smallest_int():
    assert smallest_int(0, 127) == np.int8 and smallest_int(0, 128) == np.int16
    assert smallest_int(-129, 0) == np.int16 and smallest_int(0, 2**15) == np.int32
    assert smallest_int(0, 2**31 - 1) == np.int32 and smallest_int(0, 2**31) == np.int64
    assert smallest_int(0, 5, np.int32) == np.int32 and smallest_int(0, 2**40, np.int32) == np.int64


def _structure(root, parts):
    return [load_file(root / f"part{p}" / "graph.safetensors") for p in range(parts)]


def test_writer_chooses_int32_ids_and_int8_types(tmp_path):
    partition_graph(small_hetero(), "s", 3, tmp_path, part_method="random", num_hops=2)
    for t in _structure(tmp_path, 3):
        assert {str(t[k].dtype) for k in ID_KEYS} == {"int32"}
        assert {str(t[k].dtype) for k in SMALL_KEYS} == {"int8"}
        assert {str(t[k].dtype) for k in WIDE_KEYS} == {"int64"}


def _mapping_of(address: int) -> str | None:
    """The file mapped at ``address`` in this process (from /proc/self/maps), or None for anonymous memory."""
    for line in open("/proc/self/maps"):
        fields = line.split(maxsplit=5)
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        if lo <= address < hi:
            return fields[5].strip() if len(fields) == 6 and fields[5].startswith("/") else None
    return None


def test_loaded_structure_is_mapped_from_the_file_not_copied(tmp_path):
    """What a process holds of a partition's structure is the file's pages (shared by every process of the
    host through the page cache), not a private copy: the per-node tensors too, which readers need as int64."""
    partition_graph(small_homo(), "h", 2, tmp_path, part_method="random")
    gr = load_partition(tmp_path / "h.json", 1).graph
    want = str(tmp_path / "part1" / "graph.safetensors")
    tensors = {"indptr": gr.indptr, "indices": gr.indices, **{f"node/{k}": v for k, v in gr.ndata.items()}}
    for key, t in tensors.items():
        assert _mapping_of(t.data_ptr()) == want, key


def test_writer_chooses_int64_where_values_do_not_fit(tmp_path, monkeypatch):
    """The threshold lowered to 40: IDs that can reach 40 are int64, the others (indices of small local
    graphs, part and type IDs) stay narrow; the partitions load and equal those of the full threshold."""
    g = small_hetero()
    partition_graph(g, "s", 3, tmp_path / "narrow", part_method="random", num_hops=2)
    monkeypatch.setattr("graphshard.limits.INT32_MAX", 40)
    partition_graph(g, "s", 3, tmp_path / "wide", part_method="random", num_hops=2)
    for t in _structure(tmp_path / "wide", 3):
        n_local = t["node/_ID"].shape[0]
        assert t["node/_ID"].dtype == np.int64  # 88 nodes: IDs up to 87
        assert t["edge/_ID"].dtype == np.int64
        assert t["indptr"].dtype == np.int64  # always
        assert t["indices"].dtype == (np.int32 if n_local <= 41 else np.int64)
        assert t["node/_TYPE"].dtype == np.int8
    monkeypatch.undo()
    _same_partitions(tmp_path / "narrow" / "s.json", tmp_path / "wide" / "s.json", 3)


def _same_partitions(a, b, parts):
    for p in range(parts):
        x, y = load_partition(a, p), load_partition(b, p)
        for u, v in [(x.graph.indptr, y.graph.indptr), (x.graph.indices, y.graph.indices)]:
            assert torch.equal(u.long(), v.long())
        for k in x.graph.ndata:
            assert torch.equal(x.graph.ndata[k].long(), y.graph.ndata[k].long()), k
        for k in x.graph.edata:
            assert torch.equal(x.graph.edata[k].long(), y.graph.edata[k].long()), k
        assert x.node_feats.keys() == y.node_feats.keys()


def _all_int64(lo, hi, least=np.int8):
    return np.dtype(np.int64)


def _int32_per_node(choose):
    def narrow(*args, **kwargs):
        return choose(*args, **kwargs) | {"indptr": np.dtype(np.int32), "node/_ID": np.dtype(np.int32)}

    return narrow


def test_int64_partitions_of_older_runs_still_load(tmp_path, monkeypatch):
    """Partitions written with every ID int64 (as before compact structure) load, validate and hold the
    original graph's edges; and the loaded structure keeps the stored (compact) types memory-mapped."""
    g = small_homo()
    monkeypatch.setattr(dtypes, "smallest_int", _all_int64)
    partition_graph(g, "h", 2, tmp_path / "old", part_method="random", save_orig_ids=True)
    monkeypatch.undo()
    assert {str(v.dtype) for v in _structure(tmp_path / "old", 2)[0].values()} == {"int64", "bool"}
    partition_graph(g, "h", 2, tmp_path / "new", part_method="random", save_orig_ids=True)
    _same_partitions(tmp_path / "old" / "h.json", tmp_path / "new" / "h.json", 2)
    # and partitions with int32 indptr and node IDs, as written before they were stored int64
    monkeypatch.setattr(build, "structure_dtypes", _int32_per_node(build.structure_dtypes))
    partition_graph(g, "h", 2, tmp_path / "int32", part_method="random", save_orig_ids=True)
    monkeypatch.undo()
    assert _structure(tmp_path / "int32", 2)[0]["indptr"].dtype == np.int32
    _same_partitions(tmp_path / "int32" / "h.json", tmp_path / "new" / "h.json", 2)
    src, dst = next(iter(g.edges.values()))
    want = sorted(zip(src.tolist(), dst.tolist()))
    for root in ("old", "int32", "new"):
        got = []
        for p in range(2):
            part = load_partition(tmp_path / root / "h.json", p)
            gr = part.graph
            if root != "old":
                assert gr.indices.dtype == torch.int32 and gr.edata["_TYPE"].dtype == torch.int8
                assert gr.indptr.dtype == torch.int64  # per-node: widened for offset arithmetic
            inner = gr.edata["inner_edge"].numpy()
            orig = gr.ndata["orig_id"].numpy().astype(np.int64)
            dst_local = gr.dst_local().numpy()
            got += zip(orig[gr.indices.numpy()[inner]].tolist(), orig[dst_local[inner]].tolist())
        assert sorted(got) == want, root


def test_compact_partitions_are_at_most_six_tenths_of_int64(tmp_path, monkeypatch):
    g = small_homo()
    g.node_feats, g.edge_feats = {}, {}
    partition_graph(g, "h", 2, tmp_path / "new", part_method="random")
    monkeypatch.setattr(dtypes, "smallest_int", _all_int64)
    partition_graph(g, "h", 2, tmp_path / "old", part_method="random")

    def size(root):
        return sum((root / f"part{p}" / "graph.safetensors").stat().st_size for p in range(2))

    assert size(tmp_path / "new") <= 0.6 * size(tmp_path / "old")


# -- reduced-precision features ----------------------------------------------------------------------
@pytest.mark.parametrize("feat_dtype,code,rtol", [("float16", "F16", 2e-3), ("bfloat16", "BF16", 8e-3)])
def test_features_round_trip_in_reduced_precision(tmp_path, feat_dtype, code, rtol):
    g = small_hetero()
    partition_graph(g, "s", 2, tmp_path / "full", part_method="random")
    partition_graph(g, "s", 2, tmp_path / "half", part_method="random", feat_dtype=feat_dtype)
    full, half = (json.loads((tmp_path / d / "s.json").read_text()) for d in ("full", "half"))
    assert half["feat_dtype"] == feat_dtype and "feat_dtype" not in full
    assert half["run_fingerprint"] != full["run_fingerprint"]  # the storage dtype is part of the run's identity
    for kind in ("node_feats", "edge_feats"):
        for key, spec in full["feature_schema"][kind].items():
            want = code if spec["dtype"] in ("F32", "F64") else spec["dtype"]
            assert half["feature_schema"][kind][key]["dtype"] == want, key
    for p in range(2):
        a, b = (load_partition_feats(tmp_path / d / "s.json", p) for d in ("full", "half"))
        for x, y in zip(a, b):
            assert x.keys() == y.keys()
            for key in x:
                if x[key].is_floating_point():
                    assert y[key].dtype == {"float16": torch.float16, "bfloat16": torch.bfloat16}[feat_dtype]
                    torch.testing.assert_close(y[key].float(), x[key].float(), rtol=rtol, atol=1e-6)
                else:
                    assert torch.equal(x[key], y[key]), key
        header = read_header(tmp_path / "half" / f"part{p}" / "node_feats.safetensors")
        assert header["paper/feat"]["dtype"] == code


def test_bfloat16_rounds_as_torch_does():
    from graphshard.format.feat_dtype import narrow

    x = np.array([1.0, 1.00390625, 1.01171875, -3.3e38, 3.4e38, np.inf, np.nan, 1e-40, 0.1], dtype=np.float32)
    ours = torch.from_numpy(narrow(x, "bfloat16").view(np.int16)).view(torch.bfloat16)
    theirs = torch.from_numpy(x).to(torch.bfloat16)
    finite = ~torch.from_numpy(np.isnan(x))
    assert torch.equal(ours.view(torch.int16)[finite], theirs.view(torch.int16)[finite])
    assert bool(ours[~finite].isnan().all())  # a NaN stays a NaN (torch's bits for it vary by CPU path)


def test_unknown_feat_dtype_is_refused(tmp_path):
    from graphshard import InputError

    with pytest.raises(InputError, match="feat_dtype 'float8'"):
        partition_graph(small_homo(), "h", 2, tmp_path, part_method="random", feat_dtype="float8")


def test_float16_storage_refuses_a_feature_beyond_its_range(tmp_path):
    """float16's largest finite value is 65504: a feature holding 1e6 would be stored as inf (and training would
    later blame the data). Refused before any work, naming the feature, its largest magnitude and bfloat16;
    bfloat16 (float32's range) stores the same feature, and an inf already in the data is no overflow."""
    from graphshard import InputError

    g = small_homo()
    feat = np.asarray(g.node_feats["_N"]["feat"], dtype=np.float32).copy()
    feat[3, 1] = -1.0e6
    feat[4, 0] = np.inf
    g.node_feats["_N"]["feat"] = feat
    with pytest.raises(InputError, match=r"feature '_N/feat' holds values up to 1e\+06.*bfloat16"):
        partition_graph(g, "h", 2, tmp_path / "half", part_method="random", feat_dtype="float16")
    assert not (tmp_path / "half").exists()
    partition_graph(g, "h", 2, tmp_path / "b", part_method="random", feat_dtype="bfloat16")
    feat[3, 1] = 6.0e4  # within float16's range: stored
    partition_graph(g, "h", 2, tmp_path / "f", part_method="random", feat_dtype="float16")
    assert json.loads((tmp_path / "f" / "h.json").read_text())["feat_dtype"] == "float16"

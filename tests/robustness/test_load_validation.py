"""Corrupt or inconsistent partitions are refused at load (by default), naming the file; never trusted."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from graphshard import FormatError, InputError, load_partition, partition_graph
from graphshard.format.load import verify_checksums
from tests.format.tamper import restamp, rewrite
from tests.graphs import small_hetero, small_homo


@pytest.fixture
def parts(tmp_path):
    partition_graph(small_hetero(), "h", 3, tmp_path / "p", part_method="random", num_hops=1)
    return tmp_path / "p"


def _json(config, change):
    raw = json.loads(config.read_text())
    change(raw)
    config.write_text(json.dumps(raw))


def _swap(a, b, config):
    tmp = a.with_suffix(".tmp")
    shutil.move(a, tmp), shutil.move(b, a), shutil.move(tmp, b)
    raw = json.loads(config.read_text())
    sums = raw["checksums"]
    ka, kb = (str(x.relative_to(config.parent)) for x in (a, b))
    sums[ka], sums[kb] = sums[kb], sums[ka]  # checksums follow the files: verify=True alone would pass
    config.write_text(json.dumps(raw))


def _shift_first_item(ranges):
    """Re-tile ``ranges`` (per type, per partition [start, end)) consistently but wrongly: the last item of
    partition 0 moves to partition 1; the ranges still tile the ID space partition-major, type-minor."""
    types = list(ranges)
    last = [t for t in types if ranges[t][0][1] > ranges[t][0][0]][-1]
    ranges[last][0][1] -= 1
    for t in types[types.index(last) + 1 :]:
        ranges[t][0] = [x - 1 for x in ranges[t][0]]
    ranges[types[0]][1][0] -= 1


# -- files of another partition, graph or run ----------------------------------------------------
def test_feature_files_swapped_between_partitions(parts):
    _swap(parts / "part0" / "node_feats.safetensors", parts / "part1" / "node_feats.safetensors", parts / "h.json")
    verify_checksums(parts / "h.json")  # the checksum pass alone accepts the swap
    with pytest.raises(
        FormatError,
        match=r"part0/node_feats.safetensors: this file belongs to another partition .*"
        r"part_id='1'.*expects part_id='0'",
    ):
        load_partition(parts / "h.json", 0, verify=True)


def test_file_of_another_kind_is_refused(parts):
    shutil.copy(parts / "part1" / "node_feats.safetensors", parts / "part1" / "edge_feats.safetensors")
    with pytest.raises(
        FormatError, match=r"part1/edge_feats.safetensors: .*kind='node_feats'.*expects kind='edge_feats'"
    ):
        load_partition(parts / "h.json", 1)


def test_file_from_another_graph_is_refused(parts, tmp_path):
    partition_graph(small_hetero(seed=1), "h", 3, tmp_path / "other", part_method="random")
    other = json.loads((tmp_path / "other" / "h.json").read_text())["run_fingerprint"]
    shutil.copy(tmp_path / "other" / "part2" / "graph.safetensors", parts / "part2" / "graph.safetensors")
    with pytest.raises(
        FormatError,
        match=rf"part2/graph.safetensors: this file belongs to another .*"
        rf"run_fingerprint='{other}'.*the config expects run_fingerprint=",
    ):
        load_partition(parts / "h.json", 2, load_feats=False)


def test_file_of_another_graph_name_is_refused(parts, tmp_path):
    partition_graph(small_hetero(), "other", 3, tmp_path / "o", part_method="random", num_hops=1)
    shutil.copy(tmp_path / "o" / "part0" / "edge_feats.safetensors", parts / "part0" / "edge_feats.safetensors")
    with pytest.raises(
        FormatError, match=r"part0/edge_feats.safetensors: .*graph_name='other'.*expects graph_name='h'"
    ):
        load_partition(parts / "h.json", 0)


def test_same_id_space_other_features_is_another_run(parts, tmp_path):
    """Two runs of the same graph whose features differ are different runs (the schema is in the fingerprint)."""
    g = small_hetero()
    g.node_feats["paper"]["feat"] = g.node_feats["paper"]["feat"].astype(np.float64)
    partition_graph(g, "h", 3, tmp_path / "f64", part_method="random", num_hops=1)
    for p in range(3):  # every partition replaced: consistent among themselves, rows right, run wrong
        shutil.copy(
            tmp_path / "f64" / f"part{p}" / "node_feats.safetensors", parts / f"part{p}" / "node_feats.safetensors"
        )
    with pytest.raises(
        FormatError, match=r"part1/node_feats.safetensors: this file belongs to another .*run_fingerprint"
    ):
        load_partition(parts / "h.json", 1)


def test_files_without_identity_need_repartitioning(parts):
    path = parts / "part0" / "graph.safetensors"
    from safetensors.numpy import load_file, save_file

    save_file(load_file(path), path)  # as written before files recorded their run
    with pytest.raises(FormatError, match=r"part0/graph.safetensors: records no identity .*re-partition"):
        load_partition(parts / "h.json", 0)
    _json(parts / "h.json", lambda raw: raw.pop("run_fingerprint"))
    with pytest.raises(FormatError, match=r"h.json: missing key 'run_fingerprint': written before .*re-partition"):
        load_partition(parts / "h.json", 1)


def test_identity_metadata_is_deterministic(tmp_path):
    from graphshard.format.tensorfile import write_tensors

    arrays = {"x": np.arange(4, dtype=np.int64)}
    a = write_tensors(tmp_path / "a", arrays, {"part_id": "0", "graph_name": "g", "kind": "node_feats"})
    b = write_tensors(tmp_path / "b", arrays, {"kind": "node_feats", "graph_name": "g", "part_id": "0"})
    assert a == b and (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()
    for out in ("r1", "r2"):
        partition_graph(small_hetero(), "h", 2, tmp_path / out, part_method="random", num_hops=2)
    for rel in json.loads((tmp_path / "r1" / "h.json").read_text())["checksums"]:
        assert (tmp_path / "r1" / rel).read_bytes() == (tmp_path / "r2" / rel).read_bytes(), rel
    assert (tmp_path / "r1" / "h.json").read_text() == (tmp_path / "r2" / "h.json").read_text()


# -- a JSON that does not describe the files -----------------------------------------------------
def test_node_map_retiled_consistently_but_wrongly(parts):
    _json(parts / "h.json", lambda raw: _shift_first_item(raw["node_map"]))
    with pytest.raises(FormatError, match="h.json: .*no longer match 'run_fingerprint'"):
        load_partition(parts / "h.json", 0)
    restamp(parts / "h.json")  # files stamped with the edited JSON's fingerprint: only the structure tells
    verify_checksums(parts / "h.json")
    with pytest.raises(FormatError, match=r"part0/graph.safetensors: inner nodes must be the local prefix"):
        load_partition(parts / "h.json", 0, verify=True)


def test_edge_map_retiled_consistently_but_wrongly(parts):
    _json(parts / "h.json", lambda raw: _shift_first_item(raw["edge_map"]))
    restamp(parts / "h.json")
    with pytest.raises(
        FormatError,
        match=r"part0/graph.safetensors: holds \d+ in-edges of inner nodes, but the "
        r"config's edge_map gives this partition \d+ edges",
    ):
        load_partition(parts / "h.json", 0)


@pytest.mark.parametrize(
    "written, claimed, message",
    [
        (2, 1, r"stores in-edges of a HALO node more than halo_hops - 1 = 0 hops .* halo_hops = 1; node/_ID"),
        (3, 2, r"stores in-edges of a HALO node more than halo_hops - 1 = 1 hops .* halo_hops = 2; node/_ID"),
    ],
)
@pytest.mark.parametrize("block", [None, 7])  # 7: the per-edge checks cross many block boundaries
def test_halo_hops_not_matching_the_files(tmp_path, monkeypatch, written, claimed, message, block):
    if block:
        monkeypatch.setattr("graphshard.format.validate.BLOCK", block)
    partition_graph(small_homo(), "g", 2, tmp_path, part_method="random", num_hops=written)
    load_partition(tmp_path / "g.json", 0)
    _json(tmp_path / "g.json", lambda raw: raw.__setitem__("halo_hops", claimed))
    with pytest.raises(FormatError, match="no longer match 'run_fingerprint'"):
        load_partition(tmp_path / "g.json", 0)
    restamp(tmp_path / "g.json")
    with pytest.raises(FormatError, match=rf"part0/graph.safetensors: {message}"):
        load_partition(tmp_path / "g.json", 0)


def test_halo_node_beyond_the_hops_is_refused(tmp_path):
    """A HALO node that no stored edge reaches within halo_hops hops (one added with no edge) is refused."""
    partition_graph(small_homo(), "g", 2, tmp_path, part_method="random", num_hops=1)
    cfg = json.loads((tmp_path / "g.json").read_text())
    lo, hi = cfg["node_map"]["_N"][1]
    ids = load_partition(tmp_path / "g.json", 0, load_feats=False).graph.ndata["_ID"].numpy()
    extra = int(np.setdiff1d(np.arange(lo, hi), ids)[0])  # a node of partition 1 that partition 0 does not hold

    def add_node(t):
        at = int(np.searchsorted(t["node/_ID"][lo:], extra)) + lo  # HALO nodes stay in increasing ID order
        t["indices"][t["indices"] >= at] += 1
        t["indptr"] = np.insert(t["indptr"], at, t["indptr"][at])
        for key, value in (
            ("node/_ID", extra),
            ("node/inner_node", False),
            ("node/orig_id", 0),
            ("node/part_id", 1),
            ("node/_TYPE", 0),
        ):
            t[key] = np.insert(t[key], at, np.array(value, dtype=t[key].dtype))

    rewrite(tmp_path / "part0" / "graph.safetensors", add_node, config=tmp_path / "g.json")
    with pytest.raises(
        FormatError,
        match=rf"part0/graph.safetensors: HALO node is not within halo_hops = 1 hops .*"
        rf"node/_ID: first at position \d+ \(value {extra}\)",
    ):
        load_partition(tmp_path / "g.json", 0, verify=True)


# -- files whose contents are inconsistent (checksums updated to match) -------------------------
@pytest.mark.parametrize(
    "tensor, change, message",
    [
        (
            "indices",
            lambda a: a.__setitem__(0, a.shape[0] * 10),
            r"'indices' holds a local node ID outside \[0, \d+\): first at position 0 \(value \d+\)",
        ),
        (
            "indices",
            lambda a: a.__setitem__(3, -1),
            r"'indices' holds a local node ID outside .*position 3 \(value -1\)",
        ),
        ("indptr", lambda a: a.__setitem__(1, a[2] + 1), "'indptr' decreases: first at position 1"),
        (
            "node/_ID",
            lambda a: a.__setitem__(-1, 10**9),  # within int32, which node IDs of 88 nodes are stored in
            r"node/_ID outside \[0, 88\): first at position \d+ "
            r"\(value 1000000000\)",
        ),
        ("node/part_id", lambda a: a.__setitem__(-1, (a[-1] + 1) % 3), "node/part_id differs from the owner"),
        ("node/_TYPE", lambda a: a.__setitem__(0, (a[0] + 1) % 4), "node/_TYPE differs"),
        (
            "node/_ID",
            lambda a: a.__setitem__(-1, a[-2]),
            r"HALO node/_ID not in increasing order \(or repeated\): local "
            r"position \d+ holds (\d+) after \1",
        ),
        ("node/inner_node", lambda a: a.__setitem__(-1, True), "inner nodes must be the local prefix"),
        (
            "edge/inner_edge",
            lambda a: a.__setitem__(0, False),
            "edge/inner_edge is false for an in-edge of an inner node",
        ),
        ("edge/_ID", lambda a: a.__setitem__(0, 10**9), r"inner edge/_ID outside this partition's range"),
        (
            "edge/_ID",
            lambda a: a.__setitem__(0, a[1]),
            r"inner edge/_ID \d+ is missing \(another ID of this partition's "
            r"range \[\d+, \d+\) repeats\)",
        ),
        ("edge/_TYPE", lambda a: a.__setitem__(0, (a[0] + 1) % 4), "edge/_TYPE differs"),
    ],
)
def test_inconsistent_file_with_updated_checksum(parts, tensor, change, message):
    path = parts / "part1" / "graph.safetensors"
    rewrite(path, lambda t: change(t[tensor]), config=parts / "h.json")
    verify_checksums(parts / "h.json")  # the checksum pass alone accepts it
    with pytest.raises(FormatError, match=f"part1/graph.safetensors: {message}"):
        load_partition(parts / "h.json", 1, verify=True)


def test_wrong_dtype_is_refused(parts):
    path = parts / "part0" / "graph.safetensors"
    rewrite(path, lambda t: t.update({"node/_TYPE": t["node/_TYPE"].astype(np.float32)}))
    with pytest.raises(FormatError, match="'node/_TYPE' has dtype torch.float32, expected torch.int8 or torch.int16"):
        load_partition(parts / "h.json", 0)


def test_ids_narrower_than_int32_are_refused(parts):
    """Part and type IDs may be int8, IDs only int32 or int64 (what the writers choose from)."""
    rewrite(parts / "part0" / "graph.safetensors", lambda t: t.update({"indices": t["indices"].astype(np.int16)}))
    with pytest.raises(FormatError, match="'indices' has dtype torch.int16, expected torch.int32 or torch.int64"):
        load_partition(parts / "h.json", 0)


def test_corrupt_header_entry_is_a_format_error(parts):
    path = parts / "part2" / "node_feats.safetensors"
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    header["paper/feat"]["shape"] = "many"
    text = json.dumps(header, separators=(",", ":")).encode().ljust(n)
    path.write_bytes(data[:8] + text + data[8 + n :])
    with pytest.raises(
        FormatError, match=r"part2/node_feats.safetensors: corrupt safetensors header \(entry 'paper/feat'"
    ):
        load_partition(parts / "h.json", 0)  # read while comparing partition 0's features with the others'


# -- features: same schema in every partition ----------------------------------------------------
def test_feature_dtype_differs_between_partitions(parts):
    rewrite(
        parts / "part2" / "node_feats.safetensors",
        lambda t: t.update({"paper/feat": t["paper/feat"].astype(np.float64)}),
    )
    with pytest.raises(
        FormatError,
        match=r"part0/node_feats.safetensors and .*part2/node_feats.safetensors disagree "
        r"on feature 'paper/feat' \(F32 rows of shape \(5,\) here, F64 rows",
    ):
        load_partition(parts / "h.json", 0)
    with pytest.raises(
        FormatError,
        match=r"part2/node_feats.safetensors and .*h.json disagree on feature 'paper/feat' "
        r"\(F64 rows of shape \(5,\) here, F32 rows of shape \(5,\) in its config",
    ):
        load_partition(parts / "h.json", 2)


def test_feature_missing_or_reshaped_in_one_partition(parts):
    rewrite(parts / "part1" / "edge_feats.safetensors", lambda t: t.pop("paper:cites:paper/weight"))
    with pytest.raises(
        FormatError,
        match=r"part0/edge_feats.safetensors and .*part1/edge_feats.safetensors disagree on "
        r"feature 'paper:cites:paper/weight' \(F32 rows of shape \(\) here, absent",
    ):
        load_partition(parts / "h.json", 0)
    rewrite(
        parts / "part2" / "node_feats.safetensors",
        lambda t: t.update({"paper/feat": t["paper/feat"].reshape(-1, 5, 1)}),
    )
    with pytest.raises(
        FormatError, match=r"part2/node_feats.safetensors and .*h.json disagree on feature 'paper/feat'"
    ):
        load_partition(parts / "h.json", 2)


# -- the JSON's numbers --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda raw: raw["node_map"]["paper"][0].__setitem__(1, 2**70),
            r"h.json: node_map\['paper'\] must be a list of \[start, end\] pairs of 64-bit",
        ),
        (
            lambda raw: raw["edge_map"]["paper:cites:paper"][2].__setitem__(0, -(2**70)),
            r"h.json: edge_map\['paper:cites:paper'\] must be a list of \[start, end\] pairs of 64-bit",
        ),
        (lambda raw: raw.__setitem__("num_nodes", 2**70), "h.json: key 'num_nodes' must be an integer >= 0"),
        (lambda raw: raw.__setitem__("num_edges", -1), "h.json: key 'num_edges' must be an integer >= 0"),
        (
            lambda raw: raw["feature_schema"]["node_feats"]["paper/feat"].__setitem__("shape", [-5]),
            r"h.json: feature_schema\['node_feats'\]\['paper/feat'\] must be",
        ),
    ],
)
def test_json_numbers_out_of_range(parts, change, message):
    _json(parts / "h.json", change)
    with pytest.raises(FormatError, match=message):
        load_partition(parts / "h.json", 0)


def test_cli_reports_a_corrupt_partition_in_one_line(parts):
    _swap(parts / "part0" / "graph.safetensors", parts / "part1" / "graph.safetensors", parts / "h.json")
    run = subprocess.run(
        [sys.executable, "-m", "graphshard.cli", "inspect", str(parts / "h.json"), "--verify"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "part0/graph.safetensors: this file belongs to another partition" in run.stderr


# -- the compiled samplers' boundary -------------------------------------------------------------
_SAMPLE = textwrap.dedent("""
    import sys
    import numpy as np
    from graphshard.errors import InputError
    from graphshard.sampling.neighbor import CSCGraph, sample_neighbors
    bad = int(sys.argv[1])
    indptr = np.array([0, 2, 3, 4], dtype=np.int64)
    indices = np.array([1, bad, 0, 1], dtype=np.int64)
    try:
        out = sample_neighbors(CSCGraph(indptr, indices), np.array([1]), [2, 2])
    except InputError as exc:
        print("refused:", exc)
    else:
        print("sampled:", out.node.tolist())
""")


@pytest.mark.parametrize("bad", [10**9, -1])
def test_sampler_refuses_out_of_bounds_source_ids(bad):
    """Run apart from pytest: before the boundary check an ID far out of range crashed the process
    (SIGSEGV) and -1 silently sampled the last node."""
    run = subprocess.run([sys.executable, "-c", _SAMPLE, str(bad)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"sampler process died with code {run.returncode}: {run.stderr[-500:]}"
    assert run.stdout.strip() == f"refused: CSCGraph: indices[1] = {bad} is not a node ID in [0, 3)"


def test_sampler_refuses_bad_indptr_and_seeds():
    with pytest.raises(InputError, match="indptr decreases at node 1"):
        from graphshard.sampling.neighbor import CSCGraph

        CSCGraph(np.array([0, 3, 2, 4], dtype=np.int64), np.array([0, 1, 2, 0], dtype=np.int64))
    with pytest.raises(InputError, match=r"indptr must start at 0 and end at len\(indices\) = 4"):
        CSCGraph(np.array([0, 1, 2, 5], dtype=np.int64), np.array([0, 1, 2, 0], dtype=np.int64))
    from graphshard.sampling.neighbor import sample_neighbors

    g = CSCGraph(np.array([0, 1, 2, 3], dtype=np.int64), np.array([1, 2, 0], dtype=np.int64))
    for seed in (-1, 3):
        with pytest.raises(InputError, match=r"seed IDs must lie in \[0, 3\)"):
            sample_neighbors(g, np.array([0, seed]), [1])


def test_distributed_stores_refuse_bad_structure(parts):
    import torch

    from graphshard.distributed.remote.sampling_graph import LocalSamplingGraph
    from graphshard.distributed.stores.local import LocalGraphStore

    part = load_partition(parts / "h.json", 0, load_feats=False)
    bad = part.graph.indices.clone()
    bad[0] = -5
    graph = type(part.graph)(part.graph.indptr, bad, part.graph.ndata, part.graph.edata)
    with pytest.raises(InputError, match=r"partition 0: indices\[0\] = -5 is not a node ID"):
        LocalSamplingGraph(graph, part.partition_book, 0)
    with pytest.raises(InputError, match=r"partition 0: indices\[0\] = -5 is not a node ID"):
        LocalGraphStore(part._replace(graph=graph))
    short = dict(part.graph.edata, _TYPE=part.graph.edata["_TYPE"][:-1])
    graph = type(part.graph)(part.graph.indptr, part.graph.indices, part.graph.ndata, short)
    with pytest.raises(InputError, match=r"partition 0: edge/_TYPE has shape \(\d+,\), expected \d+ entries"):
        LocalSamplingGraph(graph, part.partition_book, 0)
    assert torch.equal(part.graph.indices, load_partition(parts / "h.json", 0, load_feats=False).graph.indices)


# -- original IDs (read when the partition book is asked for them) --------------------------------
def test_original_ids_must_be_a_permutation(tmp_path):
    from graphshard.format.load import load_partition_book

    partition_graph(small_hetero(), "h", 2, tmp_path / "a", part_method="random", save_orig_ids=True)
    partition_graph(small_hetero(), "h", 2, tmp_path / "b", part_method="random")
    rewrite(tmp_path / "a" / "part1" / "orig_nids.safetensors", lambda t: t["paper"].__setitem__(0, t["paper"][1]))
    with pytest.raises(
        FormatError,
        match=r"a/h.json: the original node IDs of type 'paper' .* not a permutation: "
        r"original ID \d+ is missing",
    ):
        load_partition_book(tmp_path / "a" / "h.json").from_original("paper", [0])
    rewrite(tmp_path / "a" / "part0" / "orig_nids.safetensors", lambda t: t.update({"author": t["author"][:-1]}))
    with pytest.raises(
        FormatError, match=r"part0/orig_nids.safetensors: tensor 'author' must hold the \d+ original IDs"
    ):
        load_partition_book(tmp_path / "a" / "h.json").to_original("author", [0])
    rewrite(tmp_path / "b" / "part0" / "graph.safetensors", lambda t: t["node/orig_id"].__setitem__(0, -7))
    load_partition(tmp_path / "b" / "h.json", 0)  # orig_id is not used by the structure
    with pytest.raises(
        FormatError,
        match=r"b/h.json: the original node IDs of type 'paper' .* per-type new ID 0 has "
        r"original ID -7, outside \[0, 60\)",
    ):
        load_partition_book(tmp_path / "b" / "h.json").to_original("paper", [3])

"""Loading partitions: memory mapping, validation and clear errors for damaged files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphshard import FormatError, load_partition, load_partition_feats, partition_graph
from graphshard.format.load import verify_checksums
from tests.graphs import small_hetero


@pytest.fixture
def written(tmp_path):
    partition_graph(small_hetero(), "h", 2, tmp_path, part_method="metis", num_hops=2)
    return tmp_path


def test_load_partition_fields_and_mmap(written):
    part = load_partition(written / "h.json", 1, verify=True)
    assert part.graph_name == "h" and part.ntypes == ["paper", "author", "venue", "ghost"]
    assert part.etypes[0] == ("author", "writes", "paper")
    assert part.partition_book.partid == 1
    assert {"paper/feat", "paper/label", "author/emb"} == set(part.node_feats)
    # memory-mapped: tensors do not own their memory
    assert not part.graph.indices.untyped_storage().resizable()
    nf, ef = load_partition_feats(written / "h.json", 0)
    assert set(ef) == {"paper:cites:paper/weight"}
    assert part.graph.dst_local().shape == part.graph.indices.shape
    skip = load_partition(written / "h.json", 0, load_feats=False)
    assert skip.node_feats == {} and skip.edge_feats == {}


def _edit_json(path, fn):
    meta = json.loads(path.read_text())
    fn(meta)
    path.write_text(json.dumps(meta))


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda m: m.pop("node_map"), "missing key 'node_map'"),
        (
            lambda m: m["node_map"]["paper"].__setitem__(1, [x + 1 for x in m["node_map"]["paper"][1]]),
            r"node_map\['paper'\]\[1\] starts at \d+, expected",
        ),
        (
            lambda m: m["node_map"]["paper"][1].__setitem__(0, 999),
            r"node_map\['paper'\] must hold 2 \[start, end\] pairs",
        ),
        (lambda m: m.__setitem__("num_nodes", 5), "covers 88 IDs but the graph has 5"),
        (lambda m: m["edge_map"].pop("paper:cites:paper"), "one entry per type"),
        (lambda m: m.pop("part-1"), "missing key 'part-1'"),
        (lambda m: m.__setitem__("format_version", 2), "unsupported format"),
        (lambda m: m.__setitem__("num_parts", "2"), "'num_parts' must be an integer"),
        # a checksum's file must lie inside the partition directory: '/' joined to it is the file system's root
        (lambda m: m["checksums"].__setitem__("/", "0" * 64), r"key 'checksums' file '/'"),
        (lambda m: m["checksums"].__setitem__("../h.json", "0" * 64), r"key 'checksums' file '\.\./h\.json'"),
    ],
)
def test_bad_json_raises_format_error(written, edit, match):
    _edit_json(written / "h.json", edit)
    with pytest.raises(FormatError, match=match):
        load_partition(written / "h.json", 0)


def test_not_json(written):
    (written / "h.json").write_text("{not json")
    with pytest.raises(FormatError, match="h.json: not valid JSON"):
        load_partition(written / "h.json", 0)


def test_truncated_file_named(written):
    f = written / "part1" / "graph.safetensors"
    f.write_bytes(f.read_bytes()[:-10])
    with pytest.raises(FormatError, match=r"part1/graph.safetensors: truncated"):
        load_partition(written / "h.json", 1)


def test_corrupt_bytes_caught_by_checksum(written):
    f = written / "part0" / "node_feats.safetensors"
    data = bytearray(f.read_bytes())
    data[-3] ^= 0xFF
    f.write_bytes(bytes(data))
    load_partition(written / "h.json", 0)  # structure intact: loads without verify
    with pytest.raises(FormatError, match=r"part0/node_feats.safetensors: sha256 does not match"):
        load_partition(written / "h.json", 0, verify=True)
    with pytest.raises(FormatError, match="sha256"):
        verify_checksums(written / "h.json")


def test_missing_file_and_tensor(written):
    (written / "part0" / "edge_feats.safetensors").unlink()
    with pytest.raises(FormatError, match=r"part0/edge_feats.safetensors: file is missing"):
        load_partition(written / "h.json", 0)
    from tests.format.tamper import rewrite

    rewrite(written / "part1" / "graph.safetensors", lambda t: t.pop("node/orig_id"))
    with pytest.raises(FormatError, match=r"part1/graph.safetensors: missing tensor 'node/orig_id'"):
        load_partition(written / "h.json", 1)


def test_wrong_feature_rows(written):
    from tests.format.tamper import rewrite

    rewrite(written / "part0" / "node_feats.safetensors", lambda t: t.update({"paper/feat": t["paper/feat"][:-1]}))
    with pytest.raises(FormatError, match=r"feature 'paper/feat' has \d+ rows, expected"):
        load_partition(written / "h.json", 0)


def test_bad_partition_id(written):
    with pytest.raises(FormatError, match="partition 5 does not exist"):
        load_partition(written / "h.json", 5)


def test_writer_output_readable_by_safetensors_library(tmp_path):
    """Our streaming writer produces files the reference library reads back exactly."""
    from safetensors.numpy import load_file

    from graphshard.format.tensorfile import sha256_file, write_tensors

    arrays = {
        "b": np.array([True, False]),
        "a": np.arange(5, dtype=np.int64),
        "f": np.ones((2, 3), np.float16),
        "e": np.zeros((0, 4), np.float32),
    }
    digest = write_tensors(tmp_path / "x.safetensors", arrays)
    assert digest == sha256_file(tmp_path / "x.safetensors")
    back = load_file(tmp_path / "x.safetensors")
    assert set(back) == set(arrays)
    for k in arrays:
        assert back[k].dtype == arrays[k].dtype and np.array_equal(back[k], arrays[k])


def test_tensors_start_aligned_and_whole_line_rows_on_cache_lines(tmp_path):
    """Every tensor starts at a multiple of its element size within the file, and one of whole 64-byte lines
    (here 64-byte rows, after tensors that are not) at a multiple of 64: its rows map onto whole cache lines.
    The reference library still reads the file back exactly."""
    from safetensors.numpy import load_file

    from graphshard.format.tensorfile import read_header, read_tensors, write_tensors

    arrays = {
        "a_label": np.arange(7, dtype=np.int64),  # 56 bytes: not whole lines
        "b_mask": np.array([True, False, True]),
        "feat": np.arange(5 * 16, dtype=np.float32).reshape(5, 16),  # rows of 64 bytes
        "half": np.ones((2, 3), np.float16),
    }
    path = tmp_path / "x.safetensors"
    write_tensors(path, arrays)
    header = read_header(path)
    with open(path, "rb") as f:
        data_start = 8 + int.from_bytes(f.read(8), "little")
    for name, a in arrays.items():
        begin = data_start + header[name]["data_offsets"][0]
        assert begin % a.dtype.itemsize == 0, name
    assert (data_start + header["feat"]["data_offsets"][0]) % 64 == 0
    assert read_tensors(path)["feat"].data_ptr() % 64 == 0  # and so in the memory map
    back = load_file(path)
    for name, a in arrays.items():
        assert np.array_equal(back[name], a), name


def test_no_pickle_loading_anywhere():
    """Data files are never unpickled: no torch.load / pickle / allow_pickle=True in the package."""
    import pathlib

    import graphshard

    root = pathlib.Path(graphshard.__file__).parent
    for path in root.rglob("*.py"):
        text = path.read_text()
        for bad in ("torch.load(", "pickle.load", "allow_pickle=True"):
            assert bad not in text, f"{path} uses {bad}"

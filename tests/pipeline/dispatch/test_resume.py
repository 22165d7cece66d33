"""Resume: the input fingerprint, and whether a finished partition is reused or rebuilt."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace

import numpy as np

from graphshard.chunked.spec import read_metadata
from graphshard.pipeline.dispatch.resume import ResumeArea, input_fingerprint


def _fp(opts) -> str:
    return input_fingerprint(opts, read_metadata(opts.in_dir))


def test_fingerprint_changes_with_options_and_input_content_only(tiny):
    base = _fp(tiny)
    assert _fp(tiny) == base
    assert _fp(replace(tiny, out_dir=tiny.out_dir / "elsewhere", overwrite=True)) == base  # not inputs
    for changed in (
        replace(tiny, num_hops=1),
        replace(tiny, save_orig_nids=False),
        replace(tiny, save_orig_eids=False),
    ):
        assert _fp(changed) != base
    (tiny.in_dir / "notes.txt").write_text("not an input")
    assert _fp(tiny) == base
    chunk = tiny.in_dir / "edges" / "a__x__b" / "chunk-0.npy"
    st = os.stat(chunk)
    edges = np.load(chunk)
    edges[0, 0] = (edges[0, 0] + 1) % 3
    np.save(chunk, edges)
    os.utime(chunk, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime: only the content differs
    assert os.stat(chunk).st_size == st.st_size and _fp(tiny) != base


def test_fingerprint_covers_the_assignment(tiny):
    base = _fp(tiny)
    path = tiny.partitions_dir / "a.txt"
    path.write_text(path.read_text().replace("1\n0\n1\n", "1\n1\n1\n"))
    assert _fp(tiny) != base


def _finished(tmp_path, fingerprint="fp-1") -> ResumeArea:
    """A resume area where partition 3 was finished with two files."""
    area = ResumeArea(tmp_path / ".dispatch-g", fingerprint)
    staged = area.staging_dir(3)
    staged.mkdir(parents=True)
    sums = {}
    for name, data in (("graph.safetensors", b"graph bytes"), ("node_feats.safetensors", b"feature bytes")):
        (staged / name).write_bytes(data)
        sums[f"part3/{name}"] = hashlib.sha256(data).hexdigest()
    area.finish(3, staged, sums)
    return area


def test_finished_partition_is_published_with_its_marker(tmp_path):
    area = _finished(tmp_path)
    assert not area.staging_dir(3).exists()
    assert (area.root / "part3" / "graph.safetensors").read_bytes() == b"graph bytes"
    marker = json.loads((area.root / "part3.done.json").read_text())
    assert marker["fingerprint"] == "fp-1"
    assert marker["files"] == ["node_feats", "part_graph"]
    assert marker["checksums"]["part3/graph.safetensors"] == hashlib.sha256(b"graph bytes").hexdigest()
    assert area.read_marker(3) == marker


def test_reused_only_with_the_same_fingerprint_and_intact_files(tmp_path):
    area = _finished(tmp_path)
    assert area.reusable(3, rank=0)
    assert not ResumeArea(area.root, "fp-2").reusable(3, rank=0)  # other inputs or options
    assert not area.reusable(1, rank=0)  # never finished
    (area.root / "part3" / "node_feats.safetensors").write_bytes(b"feature bytez")
    assert not area.reusable(3, rank=0)  # a file changed since


def test_missing_file_or_unreadable_marker_means_rebuild(tmp_path):
    area = _finished(tmp_path)
    (area.root / "part3" / "graph.safetensors").unlink()
    assert not area.reusable(3, rank=0)
    area = _finished(tmp_path / "again")
    area.marker(3).write_text("{not json")
    assert not area.reusable(3, rank=0)
    area.marker(3).write_text(json.dumps({"checksums": {}}))  # no fingerprint
    assert not area.reusable(3, rank=0)


def test_stale_staging_is_cleared_only_for_owned_partitions(tmp_path):
    area = ResumeArea(tmp_path, "fp")
    for name in ("part1.tmp-11", "part1.tmp-12", "part2.tmp-11", "part1"):
        (tmp_path / name).mkdir()
    area.clear_stale_staging([1, 3])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part1", "part2.tmp-11"]

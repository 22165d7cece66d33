"""The whole dispatch of the tiny graph on one rank, in this process: the output loads back as worked out
by hand, and an interrupted run resumes, reusing what it finished unless the options changed."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from graphshard.format.load import load_partition
from graphshard.pipeline.dispatch import dispatch
from graphshard.pipeline.dispatch.write import PartWriter


def test_output_loads_back_as_computed_by_hand(tiny, solo):
    config = dispatch(tiny, solo)
    assert config == tiny.out_dir.resolve() / "t.json"
    assert sorted(p.name for p in tiny.out_dir.iterdir()) == [".graphshard-output.json", "part0", "part1", "t.json"]
    assert json.loads(config.read_text())["part_method"] == "explicit"
    p0, p1 = load_partition(config, 0, verify=True), load_partition(config, 1, verify=True)
    book = p1.partition_book
    assert book.to_original("a", book.partid2nids(1, "a")).tolist() == [0, 2]
    assert book.to_original("b", book.partid2nids(0, "b")).tolist() == [0]
    assert book.to_original_eids(("b", "y", "a"), book.partid2eids(1, ("b", "y", "a"))).tolist() == [0, 2]
    assert p0.node_feats["a/f"].tolist() == [[2.0, 3.0]] and p1.node_feats["a/f"].tolist() == [[0.0, 1.0], [4.0, 5.0]]
    assert p0.edge_feats["a:x:b/w"].tolist() == [11.0, 13.0] and p1.edge_feats["a:x:b/w"].tolist() == [10.0, 12.0]


def _interrupt_at_partition_1(tiny, solo, monkeypatch):
    original = PartWriter.write_structure

    def write(self, p, *args, **kwargs):
        if p == 1:
            raise OSError("disk gone while writing partition 1")
        return original(self, p, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(PartWriter, "write_structure", write)
        with pytest.raises(OSError, match="disk gone"):
            dispatch(tiny, solo)
    resume = tiny.out_dir.resolve() / ".dispatch-t"
    assert (resume / "part0.done.json").exists() and not (resume / "part1.done.json").exists()
    assert not (tiny.out_dir / "t.json").exists()
    return (resume / "part0" / "graph.safetensors").stat().st_ino


def test_rerun_reuses_the_finished_partition(tiny, solo, monkeypatch):
    inode = _interrupt_at_partition_1(tiny, solo, monkeypatch)
    config = dispatch(tiny, solo)
    assert (tiny.out_dir / "part0" / "graph.safetensors").stat().st_ino == inode
    assert not (tiny.out_dir / ".dispatch-t").exists()
    load_partition(config, 0, verify=True), load_partition(config, 1, verify=True)


def test_rerun_with_other_options_rebuilds_it(tiny, solo, monkeypatch):
    inode = _interrupt_at_partition_1(tiny, solo, monkeypatch)
    config = dispatch(replace(tiny, num_hops=1), solo)
    assert (tiny.out_dir / "part0" / "graph.safetensors").stat().st_ino != inode
    assert json.loads(config.read_text())["halo_hops"] == 1

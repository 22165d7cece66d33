"""The disk each writing step is predicted to need, against what it writes (small graphs: the peak of the files
under its output, measured before every deletion and at the end, in blocks as ``du`` counts them), within
+25 % (and a small constant: headers, the last block of every file) above the measurement and never below it
by more than that constant; and the refusal of every step, before it writes anything, when the free space
(reported small by patching :func:`graphshard.disk.free_space`) does not hold it."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from graphshard import InputError, disk
from graphshard.chunked.counts import GraphCounts
from graphshard.chunked.spec import read_metadata
from graphshard.cli import main
from graphshard.datasets import rmat_graph, save_dataset
from graphshard.datasets.rmat_chunked import rmat_chunked_disk, write_rmat_chunked
from graphshard.distributed.ranks.context import DistContext, DistError
from graphshard.distributed.ranks.launcher import launch
from graphshard.partition.api import partition_graph
from graphshard.partition.cost import graph_data_bytes, partition_disk
from graphshard.pipeline.assign import assign_chunked
from graphshard.pipeline.assign_cost import assign_disk
from graphshard.pipeline.dispatch import DispatchOptions, dispatch
from graphshard.pipeline.dispatch.cost import count_partitions
from graphshard.plan.report import plan_data

SLACK = 256 << 10  # headers, metadata files and the last block of each file


def du(root: Path) -> int:
    """Bytes of disk the files under ``root`` take (blocks, as ``du``)."""
    total = 0
    for d, _, files in os.walk(root):
        for f in files:
            try:
                total += os.lstat(os.path.join(d, f)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


class PeakDisk:
    """The largest ``du(root)`` seen just before any file or tree is deleted in this process, and at the end:
    the peak, since what is on disk only shrinks when something is deleted."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root, self.peak, self.inside = root, 0, False
        for module, name in ((os, "unlink"), (os, "remove"), (shutil, "rmtree")):
            monkeypatch.setattr(module, name, self._wrap(getattr(module, name)))

    def _wrap(self, original):
        def deleting(*args, **kwargs):
            if not self.inside:
                self.inside = True
                try:
                    self.peak = max(self.peak, du(self.root))
                finally:
                    self.inside = False
            return original(*args, **kwargs)

        return deleting

    def result(self) -> int:
        return max(self.peak, du(self.root))


def _within(predicted: int, measured: int, what: str) -> None:
    assert measured - SLACK <= predicted <= 1.25 * measured + SLACK, (what, predicted, measured)


@pytest.fixture(scope="module")
def chunked(tmp_path_factory):
    """R-MAT scale 14 (16 k nodes, 262 k stored edges), 16 features and labels, in 2 chunks."""
    root = tmp_path_factory.mktemp("disk")
    data = root / "g"
    write_rmat_chunked(data, 14, edge_factor=8, feat_dim=16, num_classes=4, num_chunks=2)
    return data


def test_generator_writes_what_it_predicts(tmp_path):
    write_rmat_chunked(tmp_path / "g", 13, edge_factor=8, feat_dim=16, num_classes=4, num_chunks=3)
    predicted = rmat_chunked_disk(tmp_path / "g", 13, 8, 16, num_chunks=3, num_classes=4).peak_bytes
    _within(predicted, du(tmp_path / "g"), "generate")


@pytest.mark.parametrize("method", ["random", "stream", "kaminpar", "metis"])
def test_assign_peak_disk(chunked, tmp_path, monkeypatch, method):
    """stream and kaminpar peak with the adjacency's bucket files beside the output (deleted as they are sorted)."""
    run = tmp_path / "run"
    run.mkdir()
    peak = PeakDisk(run, monkeypatch)
    assign_chunked(chunked, run / "a", 4, method, memory_mb=1)
    meta = read_metadata(chunked)
    predicted = assign_disk(GraphCounts.of(meta), method, 4, run / "a", memory_mb=1).peak_bytes
    _within(predicted, peak.result(), method)


@pytest.mark.parametrize("hops, orig", [(1, False), (1, True)])
def test_partition_disk(tmp_path, hops, orig):
    g = rmat_graph(13, feat_dim=16, num_classes=4).graph
    partition_graph(g, "g", 4, tmp_path / "p", num_hops=hops, part_method="random", save_orig_ids=orig)
    node_data, edge_data = graph_data_bytes(g)
    predicted = partition_disk(
        tmp_path / "p",
        g.total_nodes,
        g.total_edges,
        4,
        node_data_bytes=node_data,
        edge_data_bytes=edge_data,
        num_hops=hops,
        orig_ids=orig,
    )
    _within(predicted.peak_bytes, du(tmp_path / "p"), f"partition {hops} hops")


def test_deeper_halo_is_bounded_above(tmp_path):
    """A 2-hop HALO is bounded by the whole graph per partition: above what is written, never below."""
    g = rmat_graph(12, feat_dim=16).graph
    partition_graph(g, "g", 2, tmp_path / "p", num_hops=2, part_method="random")
    node_data, edge_data = graph_data_bytes(g)
    predicted = partition_disk(
        tmp_path / "p",
        g.total_nodes,
        g.total_edges,
        2,
        node_data_bytes=node_data,
        edge_data_bytes=edge_data,
        num_hops=2,
    ).peak_bytes
    measured = du(tmp_path / "p")
    assert measured - SLACK <= predicted <= 2.5 * measured + SLACK, (predicted, measured)


@pytest.mark.parametrize("orig", [False, True])
def test_dispatch_disk(chunked, tmp_path, orig):
    assign_chunked(chunked, tmp_path / "a", 4, "random")
    args = ["dispatch", "--dataset", str(chunked), "--assignment", str(tmp_path / "a"), "--out", str(tmp_path / "o")]
    assert main([*args, "--num-procs", "2", *(["--save-orig-ids"] if orig else [])]) == 0
    counts = count_partitions(str(chunked), str(tmp_path / "a"), 4)
    predicted = counts.disk(tmp_path / "o", 1, orig, orig).peak_bytes
    _within(predicted, du(tmp_path / "o"), "dispatch")
    plan = plan_data(str(chunked), None, str(tmp_path / "a"), 4, procs=2, budget=1 << 40, out=tmp_path / "o")
    assert plan["dispatch"]["disk"]["peak_disk_bytes"] == counts.disk(tmp_path / "o").peak_bytes


# --- refusals ---------------------------------------------------------------------------------------------------

LITTLE = 5 << 20


@pytest.fixture
def little_space(monkeypatch):
    monkeypatch.setattr(disk, "free_space", lambda path: LITTLE)


def _refusal(step: str, path: Path) -> str:
    return rf"{step} needs about [\d.]+ [KMG]iB on {re.escape(str(path))} \(.*\), 5\.0 MiB free there"


def test_generator_refuses_without_space(tmp_path, little_space, capsys):
    out = tmp_path / "g"
    with pytest.raises(InputError, match=_refusal(r"generate rmat --chunked", out)):
        write_rmat_chunked(out, 16, feat_dim=16, num_chunks=2)
    assert not out.exists()
    argv = ["generate", "rmat", "--scale", "16", "--chunked", "--num-chunks", "2", "--out", str(out)]
    assert main(argv) == 2
    assert "--no-disk-check" in capsys.readouterr().err and not out.exists()
    assert main([*argv[:2], "--scale", "10", *argv[4:], "--no-disk-check"]) == 0  # the override
    assert (out / "metadata.json").is_file()


@pytest.mark.parametrize("method", ["stream", "random"])
def test_assign_refuses_without_space(chunked, tmp_path, little_space, capsys, method, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    predicted = assign_disk(GraphCounts.of(read_metadata(chunked)), method, 4, run / "a")
    monkeypatch.setattr(disk, "free_space", lambda path: predicted.peak_bytes // 2)
    where = run if method == "stream" else run / "a"
    with pytest.raises(InputError, match=rf"assign --method {method} needs about .* on {re.escape(str(where))} \("):
        assign_chunked(chunked, run / "a", 4, method)
    assert list(run.iterdir()) == []  # nothing written, not even the adjacency's work directory
    argv = ["assign", "--dataset", str(chunked), "--out", str(run / "a"), "--num-parts", "4", "--method", method]
    assert main(argv) == 2 and "needs about" in capsys.readouterr().err
    assert list(run.iterdir()) == []
    assert main([*argv, "--no-disk-check"]) == 0


def test_partition_refuses_without_space(tmp_path, little_space, capsys):
    ds = rmat_graph(14, feat_dim=64)
    out = tmp_path / "p"
    with pytest.raises(InputError, match=_refusal("partition", out)):
        partition_graph(ds.graph, "g", 4, out, part_method="random")
    assert not out.exists()
    save_dataset(ds, tmp_path / "d")
    argv = ["partition", "--dataset", str(tmp_path / "d"), "--num-parts", "4", "--method", "random", "--out", str(out)]
    assert main(argv) == 2
    assert "partition needs about" in capsys.readouterr().err and not out.exists()
    assert main([*argv, "--no-disk-check"]) == 0


def _dispatch_with_little_space(opts: DispatchOptions) -> None:
    """Runs in a spawned rank: dispatch where the free space is reported small."""
    disk.free_space = lambda path: LITTLE
    with DistContext.from_env(timeout=30) as ctx:
        dispatch(opts, ctx)


def test_dispatch_refuses_without_space(chunked, tmp_path):
    assign_chunked(chunked, tmp_path / "a", 4, "random")
    out = tmp_path / "o"
    opts = DispatchOptions(chunked, tmp_path / "a", out)
    with pytest.raises(DistError, match=_refusal("dispatch", out)):
        launch(_dispatch_with_little_space, 2, (opts,), timeout=60)
    assert not out.exists()  # refused after counting, before the output was touched
    opts = DispatchOptions(chunked, tmp_path / "a", out, check_disk=False)
    launch(_dispatch_with_little_space, 2, (opts,), timeout=60)
    assert (out / "rmat14.json").is_file()


def test_plan_reports_disk(chunked, tmp_path, capsys, little_space):
    assert main(["plan", "--dataset", str(chunked), "--out", str(tmp_path), "--memory", "64G"]) == 0
    text = capsys.readouterr().out
    assert "peak disk" in text and f"in {tmp_path}" in text and "5.0 MiB free" in text
    assert "disk: dispatch needs" in text and "does NOT fit" in text
    assert main(["plan", "--dataset", str(chunked), "--out", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    stream = next(m for m in data["assign"]["methods"] if m["method"] == "stream")
    assert stream["disk"]["free_bytes"] == LITTLE and not stream["disk"]["fits"]
    assert stream["disk"]["peak_disk_bytes"] > 16 * 200_000 and "adjacency bucket files" in stream["disk"]["disk_parts"]
    assert data["dispatch"]["disk"]["path"] == str(tmp_path) and data["dispatch"]["total_memory_bytes"] > 0

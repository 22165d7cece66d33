"""``dispatch`` across emulated hosts, one rank each, each reading its own copy of the chunked input and
writing its partitions into its own local directory: the files are those a one-machine dispatch writes."""

from __future__ import annotations

import filecmp
import shutil

from graphshard.chunked.writer import chunk_graph
from graphshard.datasets import community_graph
from graphshard.pipeline.assign import assign_chunked
from graphshard.pipeline.dispatch import DispatchOptions, run_dispatch

from .jobs import finish, start


def test_dispatch_writes_each_hosts_partitions_locally(cluster, tmp_path):
    g = community_graph(num_nodes=3000, num_classes=4, avg_degree=8, feat_dim=8, seed=5).graph
    chunk_graph(g, tmp_path / "chunks", 2, "numpy", graph_name="comm")
    assign_chunked(tmp_path / "chunks", tmp_path / "assign", 2, "random")
    run_dispatch(DispatchOptions(tmp_path / "chunks", tmp_path / "assign", tmp_path / "ref", 1), num_procs=2)
    c = cluster(2)
    for h in c.hosts:  # every host gets the (small) input; nothing is shared
        shutil.copytree(tmp_path / "chunks", h.workdir / "chunks")
        shutil.copytree(tmp_path / "assign", h.workdir / "assign")
    finish(
        start(
            c,
            ["dispatch", "--dataset", "chunks", "--assignment", "assign", "--out", "out", "--timeout", "60"],
            name="dispatch",
        )
    )
    for h in c.hosts:
        out = h.workdir / "out"
        assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["comm.json", f"part{h.index}"]
        assert filecmp.cmp(out / "comm.json", tmp_path / "ref" / "comm.json", shallow=False)
        same = filecmp.dircmp(out / f"part{h.index}", tmp_path / "ref" / f"part{h.index}")
        assert same.left_list == same.right_list and not same.diff_files and not same.funny_files
        assert filecmp.cmpfiles(
            out / f"part{h.index}", tmp_path / "ref" / f"part{h.index}", same.common_files, shallow=False
        )[0] == sorted(same.common_files)

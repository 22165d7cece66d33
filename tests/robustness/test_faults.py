"""Faults leave nothing running or half-published: a killed launcher takes its ranks with it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

from graphshard.chunked.writer import chunk_graph
from graphshard.datasets import community_graph
from graphshard.pipeline.assign import assign_chunked
from tests.ranks import alive, children, rank_processes
from tests.robustness.test_network import descendants


def _wait(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)  # polling a condition with a deadline, not a fixed wait
    raise AssertionError(f"timed out after {seconds} s waiting for {what}")


def test_killing_the_dispatch_launcher_stops_every_rank(tmp_path):
    g = community_graph(num_nodes=30000, avg_degree=30, seed=1).graph  # big enough to still be running
    chunk_graph(g, tmp_path / "c", 4, "numpy", graph_name="g")
    assign_chunked(tmp_path / "c", tmp_path / "a", 4, "random")
    cmd = [
        sys.executable,
        "-m",
        "graphshard.cli",
        "dispatch",
        "--in-dir",
        str(tmp_path / "c"),
        "--partitions-dir",
        str(tmp_path / "a"),
        "--out-dir",
        str(tmp_path / "out"),
        "--num-procs",
        "2",
        "--num-hops",
        "2",
        "--timeout",
        "600",
    ]
    launcher = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ranks: set[int] = set()
    try:
        # the ranks are up once the launcher has started two (they may still be importing graphshard's dispatch)
        def two_ranks():
            kids = set(rank_processes(launcher.pid))
            return kids if len(kids) >= 2 else None

        ranks = _wait(two_ranks, 120, "the two ranks to start")
        for p in ranks:  # held where they are (a small dispatch could finish before the launcher is killed)
            os.kill(p, signal.SIGSTOP)
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(10)
        for p in ranks:
            os.kill(p, signal.SIGCONT)
        start = time.monotonic()
        _wait(lambda: not any(alive(p) for p in ranks), 20, f"ranks {sorted(ranks)} to exit after the launcher died")
        assert time.monotonic() - start < 20
        assert not (tmp_path / "out" / "g.json").exists()
    finally:
        for p in ranks | {launcher.pid}:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


def _rank_losing_its_worker(config: str) -> None:
    """Rank 1 SIGKILLs its own sampler worker after the first batch, then carries on."""
    import numpy as np  # noqa: F401

    from graphshard.distributed.loaders.loader import DistNeighborLoader
    from graphshard.distributed.runtime.graph import DistGraph
    from graphshard.distributed.runtime.session import session

    # a rank that fails on a lost peer first gives the heartbeat its bound to name it: 2 s, not the default 6
    with session(timeout=30, heartbeat_timeout=2.0) as s:
        dg = DistGraph("s", config)
        seeds = dg.get_partition_book().partid2nids(s.rank).numpy()
        with DistNeighborLoader(dg, [3, 3], seeds, batch_size=4, num_workers=1) as loader:
            for b, _ in enumerate(loader):
                if s.rank == 1 and b == 0:
                    for pid in descendants(os.getpid()):  # the worker: forked by the rank's fork server, it
                        if not children(pid):  # started no process (the server did: the worker)
                            os.kill(pid, signal.SIGKILL)


def test_a_killed_sampler_worker_is_named_with_its_rank(tmp_path):
    import pytest

    from graphshard import partition_graph
    from graphshard.distributed.ranks.context import DistError
    from graphshard.distributed.ranks.launcher import launch
    from tests.graphs import small_homo

    partition_graph(small_homo(), "s", 2, tmp_path, part_method="random")
    start = time.monotonic()
    with pytest.raises(DistError) as exc:
        launch(_rank_losing_its_worker, 2, (str(tmp_path / "s.json"),), timeout=60)
    # the culprit comes first, whichever process noticed: rank 1 itself, or rank 0 losing rank 1's worker
    assert re.match(r"(sampler worker 0 of rank 1 died|rank 1 failed: .*sampler worker 0 exited)", str(exc.value)), str(
        exc.value
    )
    assert time.monotonic() - start < 60


def _dispatch_on_a_full_disk(opts) -> None:
    """Runs in a spawned rank: the disk fills up at this rank's second part file."""
    import errno

    import graphshard.pipeline.dispatch as dispatch_module
    import graphshard.pipeline.dispatch.write as write_module
    from graphshard.distributed.ranks.context import DistContext

    real, calls = write_module.write_tensors, []

    def full(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 2 and int(os.environ["RANK"]) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, *args, **kwargs)

    write_module.write_tensors = full
    with DistContext.from_env(timeout=30) as ctx:
        dispatch_module.dispatch(opts, ctx)


def test_full_disk_during_dispatch_names_the_file_and_leaves_no_staging(tmp_path):
    import pytest

    from graphshard.distributed.ranks.context import DistError
    from graphshard.distributed.ranks.launcher import launch
    from graphshard.pipeline.dispatch import DispatchOptions
    from tests.graphs import small_hetero

    chunk_graph(small_hetero(), tmp_path / "c", 2, "numpy", graph_name="g")
    assign_chunked(tmp_path / "c", tmp_path / "a", 4, "random")
    opts = DispatchOptions(tmp_path / "c", tmp_path / "a", tmp_path / "out", 1)
    with pytest.raises(
        DistError,
        match=r"rank 1 failed: .*WriteError: .*part\d\.tmp-\d+/\w+\.safetensors: "
        r"No space left on device while writing",
    ):
        launch(_dispatch_on_a_full_disk, 2, (opts,), timeout=30)
    assert not (tmp_path / "out" / "g.json").exists()
    assert not list((tmp_path / "out").rglob("*.tmp-*")), "a staging directory was left behind"

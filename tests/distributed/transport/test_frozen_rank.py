"""A rank frozen (SIGSTOP) in the middle of ``graphshard train --num-procs 2`` on one machine is named — the
right rank, what it was doing — within a few seconds of the heartbeat bound, not after twice ``--timeout``;
the launcher ends with that one line and leaves no process behind. So is a rank frozen while its peer waits
for it at a barrier that runs through the store."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graphshard.cli import main
from graphshard.datasets import community_graph, save_dataset
from graphshard.jit import NOTICE
from tests.ranks import alive, rank_processes

HEARTBEAT = 3.0
COMPILING = f"graphshard: {NOTICE}"  # the one line a cold numba cache adds


def _wait_for(path: Path, proc: subprocess.Popen, deadline: float) -> None:
    while not path.is_file():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)  # polling for the run's first checkpoint, bounded by the deadline


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_a_frozen_rank_is_named_within_the_heartbeat_bound(tmp_path):
    save_dataset(community_graph(num_nodes=3000, seed=3), tmp_path / "d")
    assert main(["partition", "--dataset", str(tmp_path / "d"), "--num-parts", "2", "--out", str(tmp_path / "p")]) == 0
    config = next((tmp_path / "p").glob("*.json"))
    cmd = [
        sys.executable,
        "-m",
        "graphshard.cli",
        "train",
        "--part-config",
        str(config),
        "--num-procs",
        "2",
        "--epochs",
        "1000",
        "--fanouts",
        "5,5",
        "--batch-size",
        "64",
        "--hidden",
        "16",
        "--checkpoint",
        str(tmp_path / "ck"),
        "--heartbeat-timeout",
        str(HEARTBEAT),
        "--timeout",
        "120",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    ranks: list[int] = []
    try:
        _wait_for(tmp_path / "ck" / "rank1" / "checkpoint.json", proc, time.monotonic() + 180)
        ranks = rank_processes(proc.pid)
        assert len(ranks) == 2, ranks
        frozen = time.monotonic()
        os.kill(ranks[1], signal.SIGSTOP)
        proc.wait(timeout=60)
        took = time.monotonic() - frozen
        err = proc.stderr.read().decode()
        left = [pid for pid in ranks if alive(pid)]  # before the clean-up below: the launcher's doing
    finally:
        for pid in ranks:  # a stopped process still dies of SIGKILL
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode not in (0, None)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert re.match(r"graphshard: error: lost rank 1 on host 127\.0\.0\.1: no heartbeat for 3\.\d s", lines[-1]), err
    assert "process frozen" in lines[-1] and "noticed by rank 0" in lines[-1], err
    lines = [ln for ln in lines if ln != COMPILING]
    assert len(lines) == 1 and "Traceback" not in err, err  # one line: no torch warnings, no traceback
    assert took < HEARTBEAT + 8, f"named after {took:.1f} s"
    assert not left, f"rank processes left behind: {left}"


def _frozen_at_a_store_barrier() -> None:
    from graphshard.distributed.runtime.session import session

    with session(timeout=60, heartbeat_timeout=HEARTBEAT) as s:
        if s.rank == 1:
            os.kill(os.getpid(), signal.SIGSTOP)  # frozen before the barrier (the launcher kills it at the end)
        s.group.barrier("never reached by rank 1")


def test_a_rank_frozen_while_its_peer_waits_at_a_store_barrier_is_named():
    from graphshard.distributed.ranks.context import DistError
    from graphshard.distributed.ranks.launcher import launch

    start = time.monotonic()
    with pytest.raises(DistError) as exc:  # the report is not held up behind the barrier's wait on the store
        launch(_frozen_at_a_store_barrier, 2, timeout=60)
    assert re.match(r"lost rank 1 on host 127\.0\.0\.1: no heartbeat for 3\.\d s", str(exc.value)), str(exc.value)
    assert time.monotonic() - start < HEARTBEAT + 20

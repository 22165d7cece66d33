"""A rank's CPU budget: its share of the host's cores, and when its loader builds batches ahead."""

from __future__ import annotations

import sys

import pytest

from graphshard.distributed.host import threads
from graphshard.errors import InputError


@pytest.mark.parametrize(
    "cores, local_ranks, omp, share", [(2, 2, "", 1), (8, 2, "", 4), (2, 4, "", 1), (8, 1, "", 8), (8, 2, "3", 3)]
)
def test_each_rank_gets_its_share_of_the_cores(monkeypatch, cores, local_ranks, omp, share):
    monkeypatch.setattr(threads, "cores", lambda: cores)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local_ranks))
    monkeypatch.setenv("OMP_NUM_THREADS", omp)
    assert threads.rank_threads() == share


@pytest.mark.parametrize("cores, remote, depth", [(2, False, 0), (2, True, 4), (4, False, 2), (4, True, 4)])
def test_batches_are_built_ahead_with_a_spare_core_or_answers_to_wait_for(monkeypatch, cores, remote, depth):
    monkeypatch.setattr(threads, "cores", lambda: cores)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert threads.prefetch_depth(remote) == depth


def _report_threads(out: str) -> None:
    import os
    from pathlib import Path

    import numba
    import torch

    n = threads.apply_thread_budget()
    Path(out, os.environ["RANK"]).write_text(
        f"{n} {torch.get_num_threads()} {numba.get_num_threads()} {sys.getswitchinterval()}"
    )


def test_the_budget_holds_for_pytorch_and_numba_in_a_launched_rank(tmp_path):
    """A rank forked before numba's pool started (starting it resets the OpenMP setting PyTorch shares) ends with
    both at its share, not PyTorch on every core."""
    from graphshard.distributed.ranks.launcher import launch

    launch(_report_threads, 2, (str(tmp_path),))
    share = max(1, threads.cores() // 2)
    assert [(tmp_path / str(r)).read_text().split() for r in range(2)] == [[str(share)] * 3 + ["0.001"]] * 2


@pytest.fixture
def _budget_kept():
    """This process's switch interval and intra-op threads as they were (the tests apply a rank's budget)."""
    import numba
    import torch

    before = sys.getswitchinterval(), torch.get_num_threads(), numba.get_num_threads()
    yield
    sys.setswitchinterval(before[0])
    torch.set_num_threads(before[1])
    numba.set_num_threads(before[2])


@pytest.mark.usefixtures("_budget_kept")
@pytest.mark.parametrize("setting, seconds", [(None, 0.001), ("0.0005", 0.0005), ("0.005", 0.005), (" 0.1 ", 0.1)])
def test_a_rank_hands_the_gil_on_after_a_millisecond_or_as_set(monkeypatch, setting, seconds):
    if setting is None:
        monkeypatch.delenv("GRAPHSHARD_SWITCH_INTERVAL", raising=False)
    else:
        monkeypatch.setenv("GRAPHSHARD_SWITCH_INTERVAL", setting)
    sys.setswitchinterval(0.005)
    threads.apply_thread_budget()
    assert sys.getswitchinterval() == pytest.approx(seconds, rel=1e-6)


@pytest.mark.usefixtures("_budget_kept")
@pytest.mark.parametrize("bad", ["0", "-1", "0.2", "1ms", "nan"])
def test_a_bad_switch_interval_is_named(monkeypatch, bad):
    monkeypatch.setenv("GRAPHSHARD_SWITCH_INTERVAL", bad)
    with pytest.raises(InputError, match=f"GRAPHSHARD_SWITCH_INTERVAL='{bad}': expected seconds"):
        threads.apply_thread_budget()

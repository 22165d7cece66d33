"""A rank's CPU budget: its share of the host's cores, and when its loader builds batches ahead."""

from __future__ import annotations

import pytest

from graphshard.distributed import threads


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
    Path(out, os.environ["RANK"]).write_text(f"{n} {torch.get_num_threads()} {numba.get_num_threads()}")


def test_the_budget_holds_for_pytorch_and_numba_in_a_launched_rank(tmp_path):
    """A rank forked before numba's pool started (starting it resets the OpenMP setting PyTorch shares) ends with
    both at its share, not PyTorch on every core."""
    from graphshard.distributed.launcher import launch

    launch(_report_threads, 2, (str(tmp_path),))
    share = max(1, threads.cores() // 2)
    assert [(tmp_path / str(r)).read_text().split() for r in range(2)] == [[str(share)] * 3] * 2

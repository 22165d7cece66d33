"""A rank that dies by a signal (an abort, a crash in native code) is named, with the signal, by the launcher:
never an empty reason, never the peer the launcher stopped afterwards."""

from __future__ import annotations

import os
import signal
import time

import pytest

from graphshard.distributed.ranks.launcher import launch
from graphshard.errors import DistError


def _abort_rank_1() -> None:
    if int(os.environ["RANK"]) == 1:
        os.kill(os.getpid(), signal.SIGABRT)
    time.sleep(30)  # rank 0 is stopped by the launcher once rank 1 is gone


def _abort_rank_1_in_a_session() -> None:
    from graphshard.distributed.runtime.session import session

    with session(timeout=30) as s:
        if s.rank == 1:
            os.kill(os.getpid(), signal.SIGABRT)
        s.group.barrier("never passed: rank 1 is gone")


@pytest.mark.parametrize("fn", [_abort_rank_1, _abort_rank_1_in_a_session], ids=["plain", "session"])
def test_a_rank_killed_by_a_signal_is_named_with_it(fn):
    began = time.monotonic()
    with pytest.raises(DistError) as err:
        launch(fn, 2, timeout=30)
    text = str(err.value)
    assert "rank 1" in text and "SIGABRT" in text, text
    assert time.monotonic() - began < 25, "the launcher waited out the timeout"

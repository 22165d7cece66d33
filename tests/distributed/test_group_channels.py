"""A group's channels are opened by every member or by none: a member started with ``GRAPHSHARD_CHANNELS=0``
turns them off for all (its peers would otherwise wait for an address it never publishes), requests then go
through TensorPipe, and a warning names it."""

from __future__ import annotations

import logging
import os

import pytest

from graphshard.distributed import channel
from graphshard.distributed.launcher import launch


@channel.handler
def _doubled(x: int) -> int:
    return 2 * x


def _mixed(_: int, without: list[int]) -> None:
    from graphshard.distributed.rpc import rpc_call
    from graphshard.distributed.runtime import session

    os.environ["GRAPHSHARD_CHANNELS"] = "0" if int(os.environ["RANK"]) in without else "1"
    warned = []
    handler = logging.Handler()
    handler.emit = lambda record: warned.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("graphshard.distributed.group_channels").addHandler(handler)
    with session(timeout=20) as s:
        assert (s.group.channels is None) == bool(without), s.rank
        for peer in range(s.world_size):  # every member asks every other, whichever way the requests go
            assert rpc_call(s.group, f"rank{peer}", _doubled, (s.rank + 10 * peer,), "test") == 2 * (s.rank + 10 * peer)
        s.group.barrier("asked")
    said_by = min(r for r in range(3) if r not in without) if without else None
    names = ", ".join(f"rank{r}" for r in without)
    assert warned == (
        [f"{names} started with GRAPHSHARD_CHANNELS=0: no member of this group uses direct channels"]
        if s.rank == said_by
        else []
    ), warned


@pytest.mark.parametrize("without", [[], [1], [0, 2]], ids=["all", "one-without", "two-without"])
def test_a_member_without_channels_turns_them_off_for_all(without):
    launch(_mixed, 3, (3, without), timeout=90)

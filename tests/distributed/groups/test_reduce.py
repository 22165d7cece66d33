"""Sums over the direct channels: on 3 ranks, every rank gets the sum of every rank's tensor (computed here
from their seeds), bit for bit the same on all; a rank that never sends is named when the wait ends; only
small sums take this way."""

from __future__ import annotations

import datetime
import hashlib

import pytest
import torch

from graphshard.distributed.groups.reduce import EXCHANGE_BYTES, ChannelSum, _Mailbox, fits
from graphshard.distributed.ranks.launcher import launch
from graphshard.errors import DistError


def _tensor(rank: int, step: int, dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * step + rank)
    return (torch.randn(1000 + step, generator=g) * 10 ** (rank - 1)).to(dtype)  # magnitudes differ: order matters


def _sums(world: int) -> None:
    from graphshard.distributed.runtime.session import session

    with session(timeout=60) as s:
        total = ChannelSum(s.group, "test")
        s.group.barrier("registered")
        digests = []
        for step in range(20):
            dtype = torch.float32 if step % 2 else torch.float64
            got = total(_tensor(s.rank, step, dtype))
            want = _tensor(0, step, dtype).clone()
            for r in range(1, world):  # in rank order, as every rank sums
                want += _tensor(r, step, dtype)
            assert got.dtype == dtype and torch.equal(got, want), step
            digests.append(hashlib.sha256(got.numpy().tobytes()).hexdigest())
        mine = ",".join(digests).encode()
        assert len(set(s.group.all_gather(mine, "digests"))) == 1  # every rank holds the same bits


def test_every_rank_gets_the_same_sum_of_every_ranks_tensor():
    launch(_sums, 3, (3,), timeout=120)


def _silent(_: int) -> None:
    from graphshard.distributed.runtime.session import session

    with session(timeout=3) as s:
        total = ChannelSum(s.group, "test")
        s.group.barrier("registered")
        if s.rank == 1:
            from graphshard.distributed.groups import reduce
            from graphshard.distributed.transport.channel import Pending

            dropped: list = []
            reduce.drop = dropped.extend  # records what the failed call drops (this process ends next)
            try:
                total(torch.ones(4))  # rank 0 never sends its own: rank 1's wait ends, naming it
            except DistError:  # the request it sent to rank 0 is dropped, not left for a later settle
                assert len(dropped) == 1 and isinstance(dropped[0], Pending) and total._sent is None, dropped
                raise
        else:  # rank 0 waits for a key nobody sets, longer than rank 1's bound: it is stopped by the launcher
            s.group.store.wait(["never"], datetime.timedelta(seconds=60))


def test_a_rank_that_never_sends_is_named():
    named = r"rank 1 failed: .*rank1: sum 'test' \(step 0\): no tensor from member\(s\) \[0\]"
    with pytest.raises(DistError, match=named):
        launch(_silent, 2, (2,), timeout=60)


class _Refusing:
    def put(self, *_):
        raise ValueError("this mailbox refuses every tensor")


def _refused(_: int) -> None:
    from graphshard.distributed.groups.reduce import _deposit
    from graphshard.distributed.groups.rpc import register, rpc_calls
    from graphshard.distributed.runtime.session import session

    with session(timeout=3) as s:
        total = ChannelSum(s.group, "test")
        if s.rank == 0:  # rank 1's tensor is refused here
            register("reduce-mailbox/test", _Refusing())
        s.group.barrier("registered")
        if s.rank == 1:
            total(torch.ones(4))  # returns: rank 0's tensor came, and a call does not wait for its own acks
            total.settle()  # the refusal is reported here, naming the step and the peer
        else:  # rank 0 puts its tensor in rank 1's mailbox, then waits to be stopped by the launcher
            rpc_calls(s.group, [("rank1", _deposit, ("test", 0, 0, torch.ones(4)))], "a deposit")
            s.group.store.wait(["never"], datetime.timedelta(seconds=60))


def test_a_refused_tensor_is_reported_by_the_next_settle():
    named = r"rank 1 failed: .*rank1: sum 'test' \(step 0\) request to rank0 failed: ValueError: this mailbox refuses"
    with pytest.raises(DistError, match=named):
        launch(_refused, 2, (2,), timeout=60)


def test_the_mailbox_wait_is_bounded_and_checked():
    box = _Mailbox()
    box.put(0, 2, torch.ones(1))
    with pytest.raises(DistError, match=r"no tensor from member\(s\) \[1\] for step 0 after 0 s"):
        box.take(0, [1, 2], 0.3, lambda: None)

    class Lost(Exception):
        pass

    def check():
        raise Lost

    with pytest.raises(Lost):
        box.take(0, [1, 2], 30.0, check)
    box.put(0, 1, torch.zeros(1))
    assert sorted(box.take(0, [1, 2], 1.0, lambda: None)) == [1, 2] and not box.steps
    assert box.take(1, [], 1.0, lambda: None) == {}  # a group of one: nothing to wait for


def test_only_small_sums_use_the_channels():
    class Group:
        world_size, channels = 5, object()

    assert fits(Group(), EXCHANGE_BYTES // 4) and not fits(Group(), EXCHANGE_BYTES // 4 + 1)
    assert not fits(None, 8)

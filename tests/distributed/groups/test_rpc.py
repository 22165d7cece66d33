"""RPC groups' barriers: a group that follows another on the same store with the same member names (one
sampler workers' pool after another) waits for its own members, never passing on what the earlier one left."""

from __future__ import annotations

import pytest

from graphshard.distributed.groups.rpc import RpcGroup
from graphshard.distributed.ranks.context import DistError


def test_a_later_group_with_the_same_names_waits_for_its_own_members():
    import torch.distributed as dist

    store = dist.HashStore()
    names = ["rank0-sampler0", "rank1-sampler0"]
    first = [RpcGroup(r, names, store, 0.5, scope="sampler-pool/0/port") for r in range(2)]
    later = [RpcGroup(r, names, store, 0.5, scope="sampler-pool/1/port") for r in range(2)]
    with pytest.raises(DistError, match=r"^rank1-sampler0: barrier 'ready' timed out .* waiting for rank0-sampler0$"):
        first[1].all_gather(b"b", "ready")  # alone, it waits its bound, then names the absent member
    assert first[0].all_gather(b"a", "ready") == [b"a", b"b"]  # the other arrives: both values, in member order
    with pytest.raises(DistError, match=r"waiting for rank1-sampler0$"):
        later[0].all_gather(b"c", "ready")  # the earlier group's value from member 1 is no answer here
    assert later[1].all_gather(b"d", "ready") == [b"c", b"d"]

"""The direct channels (:mod:`.channel`) of an RPC group: every member opens them, or none does.

``GRAPHSHARD_CHANNELS=0`` in a process's environment keeps it off the channels: its batch requests go through
TensorPipe and its gradients through gloo. The members agree on it when they join. If one was started with
it, none opens channels (a member with channels would otherwise wait for the address of a peer that never
publishes one), and a warning names the members started with it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from .channel import Channels

log = logging.getLogger(__name__)

CHANNELS_ENV = "GRAPHSHARD_CHANNELS"


def open_channels(
    all_gather: Callable[[bytes, str], list[bytes]],
    names: list[str],
    rank: int,
    store: Any,
    key: str,
    timeout: float,
    host: str,
) -> Channels | None:
    """This member's channels, listening on ``host``, its address published under ``key`` in ``store``; None
    when any member of ``names`` was started with ``GRAPHSHARD_CHANNELS=0``. Collective through the group's
    ``all_gather`` (:meth:`RpcGroup.all_gather`, bounded by the group's timeout)."""
    wanted = os.environ.get(CHANNELS_ENV, "1").strip() != "0"

    def address_of(member: int) -> tuple[str, int]:
        ip, _, port = bytes(store.get(f"{key}/channel/{member}")).decode().rpartition(":")
        return ip, int(port)

    channels = Channels(host, names[rank], timeout, address_of) if wanted else None
    try:
        if channels is not None:
            store.set(f"{key}/channel/{rank}", f"{channels.address[0]}:{channels.address[1]}")
        said = all_gather(b"1" if wanted else b"0", "direct channels")
    except BaseException:
        if channels is not None:
            channels.close()
        raise
    without = [n for n, s in zip(names, said) if s != b"1"]
    if without and channels is not None:
        if rank == min(r for r, n in enumerate(names) if n not in without):  # said once, by one member
            log.warning(
                "%s started with %s=0: no member of this group uses direct channels",
                ", ".join(without),
                CHANNELS_ENV,
            )
        channels.close()
        return None
    return channels

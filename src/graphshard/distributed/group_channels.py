"""The direct channels (:mod:`.channel`) of an RPC group: every member opens them, or none does.

``GRAPHSHARD_CHANNELS=0`` in a process's environment keeps it off the channels: its batch requests go through
TensorPipe and its gradients through gloo. The members agree on it when they join. If one was started with
it, none opens channels (a member with channels would otherwise wait for the address of a peer that never
publishes one), and a warning names the members started with it.
"""

from __future__ import annotations

import datetime
import logging
import os
from typing import Any

from .channel import Channels
from .context import DistError

log = logging.getLogger(__name__)

CHANNELS_ENV = "GRAPHSHARD_CHANNELS"


def open_channels(names: list[str], rank: int, store: Any, key: str, timeout: float, host: str) -> Channels | None:
    """This member's channels, listening on ``host``, its address published under ``key`` in ``store``; None
    when any member of ``names`` was started with ``GRAPHSHARD_CHANNELS=0``. Collective, bounded by
    ``timeout``."""
    wanted = os.environ.get(CHANNELS_ENV, "1").strip() != "0"

    def address_of(member: int) -> tuple[str, int]:
        ip, _, port = bytes(store.get(f"{key}/channel/{member}")).decode().rpartition(":")
        return ip, int(port)

    channels = Channels(host, names[rank], timeout, address_of) if wanted else None
    try:
        if channels is not None:
            store.set(f"{key}/channel/{rank}", f"{channels.address[0]}:{channels.address[1]}")
        without = _members_without(names, rank, store, key, timeout, wanted)
    except BaseException:
        if channels is not None:
            channels.close()
        raise
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


def _members_without(names: list[str], rank: int, store: Any, key: str, timeout: float, wanted: bool) -> list[str]:
    """The members started with ``GRAPHSHARD_CHANNELS=0``, once every member has said (at most ``timeout``)."""
    store.set(f"{key}/channel-wanted/{rank}", b"1" if wanted else b"0")
    keys = [f"{key}/channel-wanted/{r}" for r in range(len(names))]
    try:
        store.wait(keys, datetime.timedelta(seconds=timeout))
    except Exception:
        absent = [names[r] for r, k in enumerate(keys) if not store.check([k])]
        raise DistError(
            f"{names[rank]}: joining the channels timed out after {timeout:.0f} s waiting for "
            f"{', '.join(absent) or 'a peer'}"
        ) from None
    return [names[r] for r, k in enumerate(keys) if bytes(store.get(k)) != b"1"]

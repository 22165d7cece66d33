"""The channels (:mod:`.channel`) of a group: every member opens its own, publishes its address in the group's
store, and waits until every member has."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .channel import Channels


def open_channels(
    all_gather: Callable[[bytes, str], list[bytes]],
    names: list[str],
    rank: int,
    store: Any,
    key: str,
    timeout: float,
    host: str,
) -> Channels:
    """This member's channels, listening on ``host``, its address published under ``key`` in ``store``.
    Collective through the group's ``all_gather`` (:meth:`RpcGroup.all_gather`, bounded by the group's timeout)."""

    def address_of(member: int) -> tuple[str, int]:
        ip, _, port = bytes(store.get(f"{key}/channel/{member}")).decode().rpartition(":")
        return ip, int(port)

    channels = Channels(host, names[rank], timeout, address_of)
    try:
        store.set(f"{key}/channel/{rank}", f"{channels.address[0]}:{channels.address[1]}")
        all_gather(b"1", "channels")
    except BaseException:
        channels.close()
        raise
    return channels

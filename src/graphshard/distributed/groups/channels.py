"""The channels (:mod:`.channel`) of a group: every member opens its own, publishes its address in the group's
store, waits until every member has, then connects to the next member (in a ring) so that a member given
another secret is found at start-up: each side names the other's address."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ranks.context import DistError
from ..transport.channel import ChannelLost, ChannelRefused, Channels
from ..transport.tls import Tls

SAME_SECRET = (
    "every process of the run must be given the same secret (GRAPHSHARD_SECRET or --secret-file), and with TLS "
    "certificates of one CA"
)


def open_channels(
    all_gather: Callable[[bytes, str], list[bytes]],
    names: list[str],
    rank: int,
    store: Any,
    *,
    key: str,
    timeout: float,
    host: str,
    secret: bytes = b"",
    tls: Tls | None = None,
) -> Channels:
    """This member's channels, listening on ``host``, its address published under ``key`` in ``store``; every
    connection proves ``secret`` (the job key, see :mod:`.handshake`), inside TLS when ``tls`` is given.
    Collective through the group's ``all_gather`` (:meth:`RpcGroup.all_gather`, bounded by the group's timeout).
    Raises :class:`DistError` naming the next member and its address when it does not prove the same secret."""

    def address_of(member: int) -> tuple[str, int]:
        ip, _, port = bytes(store.get(f"{key}/channel/{member}")).decode().rpartition(":")
        return ip, int(port)

    channels = Channels(host, names[rank], timeout, address_of, key=secret, tls=tls)
    try:
        store.set(f"{key}/channel/{rank}", f"{channels.address[0]}:{channels.address[1]}")
        all_gather(b"1", "channels")
        if len(names) > 1:
            _probe(channels, names, rank)
    except BaseException:
        channels.close()
        raise
    return channels


def _probe(channels: Channels, names: list[str], rank: int) -> None:
    peer = (rank + 1) % len(names)
    try:
        channels.probe(peer)
    except ChannelRefused as exc:
        raise DistError(f"{names[rank]}: {names[peer]} at {exc} — {SAME_SECRET}") from None
    except ChannelLost as exc:
        host = channels.address_of(peer)[0]
        if host in channels.refused_hosts():  # it gave up on our proof too: it holds another secret
            raise DistError(
                f"{names[rank]}: {names[peer]} at {host} holds another secret (its connection here failed the "
                f"handshake) — {SAME_SECRET}"
            ) from None
        raise DistError(f"{names[rank]}: cannot reach {names[peer]}'s channel: {exc}") from None

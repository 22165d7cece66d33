"""Groups of processes that serve partitions to each other, with bounded waits, and owner-routed batched requests.

An :class:`RpcGroup` is the trainer ranks (:func:`init_rpc`), or the sampler worker processes of the loaders
(``dist/workers.py``). Member ``k`` serves partition ``k // per_part``; a request for partition ``p`` goes to one
of its servers. Every request travels on the group's channels (:mod:`.channel`: a JSON header and raw arrays,
nothing pickled) to a module-level handler that finds process-local state in a registry; each member publishes
its channel's address in the rendezvous store, and barriers go through the store.
"""

from __future__ import annotations

import datetime
import itertools
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import numpy as np

from ...book import positions_by_part
from ..ranks.context import PEER_FAILURE, DistContext, DistError
from ..ranks.interrupt import raise_if_pending
from ..transport.channel import ChannelLost, Channels, Pending, RemoteFailure
from ..transport.handshake import listening_key
from ..transport.network import own_address
from ..transport.tls import tls_from_env
from .channels import open_channels

_REGISTRY: dict[str, Any] = {}
_CURRENT: list[RpcGroup] = []


def worker_name(rank: int) -> str:
    return f"rank{rank}"


def register(name: str, obj: Any) -> None:
    """Make ``obj`` reachable by RPC handlers of this process under ``name``."""
    _REGISTRY[name] = obj


def registered(name: str) -> Any:
    if name not in _REGISTRY:
        raise DistError(f"nothing registered under {name!r} in this process")
    return _REGISTRY[name]


class PeerLost(DistError):
    """A request needed a member that is lost (see :attr:`RpcGroup.unavailable`); ``member`` names it."""

    def __init__(self, message: str, member: str):
        super().__init__(message)
        self.member = member


@dataclass
class RpcGroup:
    """Members ``names`` (in rank order) of one RPC group; this process is member ``rank``.

    ``lanes`` members per server process share its partition-serving load: a request for partition
    ``p`` goes to member ``p * per_part + rank % lanes`` (``per_part`` = members per partition).
    """

    rank: int
    names: list[str]
    store: Any
    timeout: float
    _: KW_ONLY
    lanes: int = 1
    # member name -> why it can no longer be asked (None: it can); set by a long-running service whose ranks
    # outlive a lost peer (graphshard serve): requests to it fail at once, and a wait on it ends when it is lost
    unavailable: Callable[[str], str | None] | None = None
    # the channels every request travels on (see .channel); set when the group is joined
    channels: Channels | None = None
    # what sets this group apart on its store (the key it joined under): barriers of an earlier group with the
    # same member names (one sampler pool after another) must not count for this one's
    scope: str = ""
    _barriers: itertools.count = field(default_factory=itertools.count)
    _members: dict[str, int] = field(default_factory=dict, repr=False)

    def member(self, name: str) -> int:
        """The index of member ``name``."""
        if not self._members:
            self._members.update((n, i) for i, n in enumerate(self.names))
        return self._members[name]

    @property
    def world_size(self) -> int:
        return len(self.names)

    def per_part(self, num_parts: int) -> int:
        if self.world_size % num_parts:
            raise DistError(f"{self.world_size} processes cannot serve {num_parts} partitions evenly")
        return self.world_size // num_parts

    def part_id(self, num_parts: int) -> int:
        return self.rank // self.per_part(num_parts)

    def owner(self, part: int, num_parts: int) -> str:
        return self.names[part * self.per_part(num_parts) + self.rank % self.lanes]

    def barrier(self, what: str) -> None:
        """Wait (at most ``timeout``) until every member reached the same barrier; names the absent ones."""
        self.all_gather(b"1", what)

    def all_gather(self, value: bytes, what: str) -> list[bytes]:
        """Every member's ``value``, in member order, through the store (a barrier with a payload)."""
        key = f"rpc-barrier/{self.scope}/{next(self._barriers)}/"
        self.store.set(f"{key}{self.rank}", value)
        keys = [f"{key}{r}" for r in range(self.world_size)]
        try:
            self.store.wait(keys, datetime.timedelta(seconds=self.timeout))
        except Exception:
            absent = [self.names[r] for r, k in enumerate(keys) if not self.store.check([k])]
            raise DistError(
                f"{self.names[self.rank]}: barrier '{what}' timed out after {self.timeout:.0f} s "
                f"waiting for {', '.join(absent) or 'a peer'}"
            ) from None
        return [bytes(self.store.get(k)) for k in keys]


def join_group(
    names: list[str],
    rank: int,
    store: Any,
    key: str,
    *,
    timeout: float,
    host: str = "127.0.0.1",
    lanes: int = 1,
) -> RpcGroup:
    """Join the group ``names`` as member ``rank``: open this member's channels on its host's address on the
    run's network (see :func:`graphshard.distributed.transport.network.own_address`), publish it in ``store``
    under ``key``, and
    wait (at most ``timeout``) until every member has; every connection proves the job's secret (see
    :mod:`.handshake`). The group becomes this process's current group. Raises :class:`InputError` when it would
    listen beyond loopback without a secret (unless ``--insecure``)."""
    address = own_address(os.environ.get("MASTER_ADDR", host))
    secret = listening_key(address, names[rank])
    group = RpcGroup(rank, names, store, timeout, lanes=lanes, scope=key)
    group.channels = open_channels(
        group.all_gather, names, rank, store, key=key, timeout=timeout, host=address, secret=secret, tls=tls_from_env()
    )
    _CURRENT[:] = [group]
    return group


def init_rpc(ctx: DistContext, host: str = "127.0.0.1") -> RpcGroup:
    """Join the group of the trainer ranks of ``ctx``; every request and barrier is bounded by ``ctx.timeout``.
    The group becomes this process's current group (see :func:`current_group`)."""
    names = [worker_name(r) for r in range(ctx.world_size)]
    return join_group(names, ctx.rank, ctx.store, "rpc/port", timeout=ctx.timeout, host=host)


def current_group() -> RpcGroup:
    if not _CURRENT:
        raise DistError("RPC is not initialised in this process: call graphshard.distributed.groups.rpc.init_rpc first")
    return _CURRENT[0]


def shutdown_rpc(group: RpcGroup | DistContext | None = None, graceful: bool = True) -> None:
    """Leave: ``graceful``, after every member of the group has come to leave too (so that none is still asked
    for anything: every member's own requests were answered before it came), else at once (after a failure)."""
    g = group if isinstance(group, RpcGroup) else current_group() if _CURRENT else None
    try:
        if graceful and g is not None:
            g.barrier("leaving")
    finally:
        for left in [x for x in _CURRENT if x is not g] + ([g] if g is not None else []):
            if left.channels is not None:
                left.channels.close()
        _CURRENT.clear()


def by_owner(
    group: RpcGroup,
    parts: np.ndarray,
    num_parts: int,
    local: Callable[[np.ndarray], Any] | None,
    *,
    remote: Callable[..., Any],
    args: Callable[[np.ndarray], tuple],
    what: str,
    near: Mapping[int, Callable[[np.ndarray], Any]] | None = None,
) -> list[tuple[np.ndarray, Any]]:
    """Route the items whose owning partitions are ``parts``: this process's own partition is served
    by ``local(positions)`` (unless ``local`` is None), a partition ``p`` this process reads itself
    (co-located, see :mod:`.colocated`) by ``near[p](positions)``, every other partition by one asynchronous
    ``remote(*args(positions))`` call to its server, all in flight at once and sent before the in-process
    work starts (which then overlaps their round trips); a ``remote`` that is a channel handler goes through
    the group's channels when it has them (see :mod:`.channel`). Returns ``(positions, result)`` per partition
    touched; raises :class:`DistError` naming a failed server."""
    mine = group.part_id(num_parts)
    done, pending, here = [], [], []
    try:
        for p, pos in positions_by_part(parts, num_parts):
            owner = group.owner(p, num_parts)
            if p == mine and (local is not None or owner == group.names[group.rank]):
                here.append((pos, local if local is not None else lambda at: remote(*args(at))))
            elif near is not None and p in near:
                here.append((pos, near[p]))
            else:
                pending.append((pos, owner, _send(group, owner, remote, args(pos), what=what)))
        for pos, serve in here:
            done.append((pos, serve(pos)))
        for pos, owner, fut in pending:
            done.append((pos, _result(group, owner, fut, what)))
    except BaseException:
        drop(fut for _, _, fut in pending)
        raise
    return done


def drop(futures: Iterable[Pending]) -> None:
    """Drop the requests ``futures`` unread (a no-op for those already answered)."""
    for fut in futures:
        fut.cancel()


def rpc_call(group: RpcGroup, owner: str, remote: Callable[..., Any], args: tuple, *, what: str) -> Any:
    """``remote(*args)`` on member ``owner``, bounded by the group's timeout; errors name the member."""
    return _result(group, owner, _send(group, owner, remote, args, what=what), what)


def rpc_calls(group: RpcGroup, calls: list[tuple[str, Callable[..., Any], tuple]], what: str) -> list[Any]:
    """``remote(*args)`` on ``owner`` for every ``(owner, remote, args)``, all in flight at once; their values
    in order. Bounded and named as :func:`rpc_call`."""
    return collect(group, send_all(group, calls, what), what)


def send_all(group: RpcGroup, calls: list[tuple[str, Callable[..., Any], tuple]], what: str) -> list[tuple[str, Any]]:
    """Send the calls of :func:`rpc_calls`, all in flight at once, without waiting (see :func:`collect`)."""
    sent: list[tuple[str, Any]] = []
    try:
        for owner, remote, args in calls:
            sent.append((owner, _send(group, owner, remote, args, what=what)))
    except BaseException:
        drop(fut for _, fut in sent)
        raise
    return sent


def collect(group: RpcGroup, sent: list[tuple[str, Any]], what: str) -> list[Any]:
    """The values of the requests :func:`send_all` sent, in order; on an error the others are dropped."""
    try:
        return [_result(group, owner, fut, what) for owner, fut in sent]
    except BaseException:
        drop(fut for _, fut in sent)
        raise


def _send(group: RpcGroup, owner: str, remote: Callable[..., Any], args: tuple, *, what: str) -> Pending:
    """Send ``remote(*args)`` (a channel handler) to ``owner`` on the group's channels."""
    _refuse_lost(group, owner, what)
    if group.channels is None:
        raise DistError(f"{group.names[group.rank]}: the group was left; no {what} request can be sent")
    try:
        return group.channels.send(group.member(owner), remote, args)
    except ChannelLost as exc:
        raise _lost(group, owner, what, exc.timed_out, detail=str(exc)) from None


def _lost(group: RpcGroup, owner: str, what: str, timed_out: bool, *, detail: str) -> PeerLost:
    """The error of a request whose peer vanished or hung (it is at fault: said so for the launcher)."""
    raise_if_pending()  # this process was told to stop, so were its peers: that is why it failed
    state = "did not answer" if timed_out else "is gone"
    return PeerLost(
        f"{group.names[group.rank]}: {PEER_FAILURE} {owner} {state} ({what} request failed: {detail})", owner
    )


def _failed(group: RpcGroup, owner: str, what: str, detail: str) -> DistError:
    """The error of a request whose handler raised on the peer."""
    raise_if_pending()
    return DistError(f"{group.names[group.rank]}: {what} request to {owner} failed: {detail}")


def _refuse_lost(group: RpcGroup, owner: str, what: str) -> None:
    why = group.unavailable(owner) if group.unavailable is not None else None
    if why is not None:
        raise PeerLost(f"{group.names[group.rank]}: {PEER_FAILURE} {owner} is lost ({what} request): {why}", owner)


def _result(group: RpcGroup, owner: str, pending: Pending, what: str) -> Any:
    """A request's value; where the group tracks lost members, the wait ends as soon as ``owner`` is lost."""
    check = None if group.unavailable is None else lambda: _refuse_lost(group, owner, what)
    try:
        return pending.result(check)
    except ChannelLost as exc:
        raise _lost(group, owner, what, exc.timed_out, detail=str(exc)) from None
    except RemoteFailure as exc:
        raise _failed(group, owner, what, str(exc)) from None

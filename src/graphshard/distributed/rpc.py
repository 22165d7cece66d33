"""``torch.distributed.rpc`` (TensorPipe) groups with bounded waits, and owner-routed batched requests.

An :class:`RpcGroup` is the set of processes that serve partitions to each other: the trainer ranks
(:func:`init_rpc`), or the sampler worker processes of the loaders (``dist/workers.py``). Member
``k`` serves partition ``k // per_part``; a request for partition ``p`` goes to one of its servers.
The first member picks a free port and publishes it in the rendezvous store; every member joins
there. Remote calls go to module-level functions that find process-local state in a registry.
"""

from __future__ import annotations

import datetime
import itertools
import os
import re
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..book import positions_by_part
from .channel import ChannelLost, Channels, Pending, RemoteFailure, handler_name
from .context import PEER_FAILURE, DistContext, DistError
from .group_channels import open_channels
from .interrupt import raise_if_pending
from .network import interface_of, own_address

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
    lanes: int = 1
    # member name -> why it can no longer be asked (None: it can); set by a long-running service whose ranks
    # outlive a lost peer (graphshard serve): requests to it fail at once, and a wait on it ends when it is lost
    unavailable: Callable[[str], str | None] | None = None
    # direct channels for the requests of every batch (see .channel); None: everything goes through TensorPipe
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


_RENDEZVOUS: dict[str, tuple[Any, int, int]] = {}


def _rendezvous(url: str, **_: Any):
    """``graphshard://<token>``: the RPC rendezvous runs through a store this process already has."""
    from urllib.parse import urlparse

    yield _RENDEZVOUS.pop(urlparse(url).netloc)


def _register_rendezvous() -> None:
    import importlib

    rdzv = importlib.import_module("torch.distributed.rendezvous")  # the package attribute is a function
    try:
        rdzv.register_rendezvous_handler("graphshard", _rendezvous)
    except RuntimeError:  # registered by an earlier group of this process
        pass


def join_group(
    names: list[str],
    rank: int,
    store: Any,
    key: str,
    timeout: float,
    host: str = "127.0.0.1",
    num_threads: int = 8,
    lanes: int = 1,
) -> RpcGroup:
    """Join RPC as member ``rank`` of ``names``. The rendezvous goes through ``store`` (under ``key``), so
    no other store is opened; TensorPipe listens on the interface of this host's address on the run's network
    (see :func:`graphshard.distributed.network.own_address`)."""
    import torch.distributed as dist
    import torch.distributed.rpc as rpc

    _register_rendezvous()
    token = f"g{os.getpid()}x{len(_RENDEZVOUS)}x{abs(hash(key))}"
    _RENDEZVOUS[token] = (dist.PrefixStore(f"{key}/rdzv/", store), rank, len(names))
    address = own_address(os.environ.get("MASTER_ADDR", host))
    iface = interface_of(address)
    if iface:  # TensorPipe's listener, and the gloo group torch's RPC creates for itself, bind there
        os.environ.setdefault("TP_SOCKET_IFNAME", iface)
        os.environ.setdefault("GLOO_SOCKET_IFNAME", iface)
    # TensorPipe's default transport between processes of one host, shared memory, keeps a thread polling
    # for messages: measured on 2 cores, it tripled the run's system CPU time and, with other work on the
    # cores, made the epoch 1.4 x slower than over loopback TCP (uv), which waits in the kernel instead.
    # Between hosts TensorPipe uses uv anyway.
    group = RpcGroup(rank, names, store, timeout, lanes, scope=key)
    channels = open_channels(group.all_gather, names, rank, store, key, timeout, address)
    opts = rpc.TensorPipeRpcBackendOptions(
        init_method=f"graphshard://{token}", rpc_timeout=timeout, num_worker_threads=num_threads, _transports=["uv"]
    )
    try:
        with warnings.catch_warnings():
            # torch's own RPC start-up gathers device maps over a private gloo backend handle and warns
            # about that use of its API: nothing a caller can change, so it is not shown to users
            warnings.filterwarnings(
                "ignore", message=r"You are using a Backend .* as a ProcessGroup", category=UserWarning
            )
            rpc.init_rpc(names[rank], rank=rank, world_size=len(names), rpc_backend_options=opts)
    except BaseException:
        if channels is not None:
            channels.close()
        raise
    finally:
        _RENDEZVOUS.pop(token, None)
    group.channels = channels
    _CURRENT[:] = [group]
    return group


def init_rpc(ctx: DistContext, host: str = "127.0.0.1", num_threads: int = 8) -> RpcGroup:
    """Join RPC with the trainer ranks of ``ctx``; every call and the shutdown are bounded by ``ctx.timeout``.
    The group becomes this process's current group (see :func:`current_group`)."""
    names = [worker_name(r) for r in range(ctx.world_size)]
    return join_group(names, ctx.rank, ctx.store, "rpc/port", ctx.timeout, host, num_threads)


def current_group() -> RpcGroup:
    if not _CURRENT:
        raise DistError("RPC is not initialised in this process: call graphshard.distributed.rpc.init_rpc first")
    return _CURRENT[0]


def shutdown_rpc(group: RpcGroup | DistContext | None = None, graceful: bool = True) -> None:
    import torch.distributed.rpc as rpc

    timeout = group.timeout if group is not None else current_group().timeout
    try:
        rpc.shutdown(graceful=graceful, timeout=timeout)
    finally:
        for g in _CURRENT:
            if g.channels is not None:
                g.channels.close()
        _CURRENT.clear()


def by_owner(
    group: RpcGroup,
    parts: np.ndarray,
    num_parts: int,
    local: Callable[[np.ndarray], Any] | None,
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
                pending.append((pos, owner, _send(group, owner, remote, args(pos), what)))
        for pos, serve in here:
            done.append((pos, serve(pos)))
        for pos, owner, fut in pending:
            done.append((pos, _result(group, owner, fut, what)))
    except BaseException:
        drop(fut for _, _, fut in pending)
        raise
    return done


def drop(futures: Iterable[Any]) -> None:
    """Drop the channel requests among ``futures`` unread (a no-op for those already answered)."""
    for fut in futures:
        if isinstance(fut, Pending):
            fut.cancel()


def rpc_call(group: RpcGroup, owner: str, remote: Callable[..., Any], args: tuple, what: str) -> Any:
    """``remote(*args)`` on member ``owner``, bounded by the group's timeout; errors name the member."""
    return _result(group, owner, _send(group, owner, remote, args, what), what)


def rpc_calls(group: RpcGroup, calls: list[tuple[str, Callable[..., Any], tuple]], what: str) -> list[Any]:
    """``remote(*args)`` on ``owner`` for every ``(owner, remote, args)``, all in flight at once; their values
    in order. Bounded and named as :func:`rpc_call`."""
    return collect(group, send_all(group, calls, what), what)


def send_all(group: RpcGroup, calls: list[tuple[str, Callable[..., Any], tuple]], what: str) -> list[tuple[str, Any]]:
    """Send the calls of :func:`rpc_calls`, all in flight at once, without waiting (see :func:`collect`)."""
    sent: list[tuple[str, Any]] = []
    try:
        for owner, remote, args in calls:
            sent.append((owner, _send(group, owner, remote, args, what)))
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


def _send(group: RpcGroup, owner: str, remote: Callable[..., Any], args: tuple, what: str) -> Any:
    """Send ``remote(*args)`` to ``owner``: through a channel when ``remote`` is a channel handler and the
    group has channels (a :class:`Pending`), else through TensorPipe (a future)."""
    import torch.distributed.rpc as rpc

    _refuse_lost(group, owner, what)
    if group.channels is not None and handler_name(remote) is not None:
        try:
            return group.channels.send(group.member(owner), remote, args)
        except ChannelLost as exc:
            raise _lost(group, owner, what, exc.timed_out, str(exc)) from None
    return rpc.rpc_async(owner, remote, args=args, timeout=group.timeout)


def _lost(group: RpcGroup, owner: str, what: str, timed_out: bool, detail: str) -> PeerLost:
    """The error of a request whose peer vanished or hung (it is at fault: said so for the launcher), over
    either transport."""
    raise_if_pending()  # this process was told to stop, so were its peers: that is why it failed
    state = "did not answer" if timed_out else "is gone"
    return PeerLost(
        f"{group.names[group.rank]}: {PEER_FAILURE} {owner} {state} ({what} request failed: {detail})", owner
    )


def _failed(group: RpcGroup, owner: str, what: str, detail: str) -> DistError:
    """The error of a request whose handler raised on the peer, over either transport."""
    raise_if_pending()
    return DistError(f"{group.names[group.rank]}: {what} request to {owner} failed: {detail}")


def _refuse_lost(group: RpcGroup, owner: str, what: str) -> None:
    why = group.unavailable(owner) if group.unavailable is not None else None
    if why is not None:
        raise PeerLost(f"{group.names[group.rank]}: {PEER_FAILURE} {owner} is lost ({what} request): {why}", owner)


def _wait(group: RpcGroup, owner: str, fut: Any, what: str) -> Any:
    """``fut``'s value; where the group tracks lost members, the wait ends as soon as ``owner`` is lost."""
    if group.unavailable is None:
        return fut.wait()
    done = threading.Event()
    fut.add_done_callback(lambda _: done.set())
    while not done.wait(0.1):  # woken by the answer at once; otherwise look again at the peer's state
        _refuse_lost(group, owner, what)
    return fut.wait()


def _result(group: RpcGroup, owner: str, fut: Any, what: str) -> Any:
    if isinstance(fut, Pending):
        return _answer(group, owner, fut, what)
    try:
        return _wait(group, owner, fut, what)
    except PeerLost:
        raise
    except Exception as exc:  # remote exceptions, dead peers and timeouts all arrive here
        if not _raised_remotely(exc):
            raise _lost(group, owner, what, "timeout" in str(exc).lower(), remote_error(exc)) from exc
        raise _failed(group, owner, what, remote_error(exc)) from exc


def _answer(group: RpcGroup, owner: str, pending: Pending, what: str) -> Any:
    """A channel request's value; its errors are raised as :func:`_result` raises TensorPipe's."""
    check = None if group.unavailable is None else lambda: _refuse_lost(group, owner, what)
    try:
        return pending.result(check)
    except ChannelLost as exc:
        raise _lost(group, owner, what, exc.timed_out, str(exc)) from None
    except RemoteFailure as exc:
        raise _failed(group, owner, what, str(exc)) from None


def _raised_remotely(exc: BaseException) -> bool:
    """Whether an RPC failed because the peer's code raised (its traceback travels as text), rather than
    because the transport lost the peer (closed connection, vanished process, timeout)."""
    text = str(exc).replace("\\n", "\n")
    return re.search(r"^\s*[\w.]+(Error|Exception|Interrupt)\b", text, re.M) is not None


def remote_error(exc: BaseException) -> str:
    """The last exception line of an error raised on an RPC peer (its traceback travels as text)."""
    text = str(exc).replace("\\n", "\n")
    lines = [ln.strip() for ln in text.splitlines() if re.match(r"^\s*[\w.]+(Error|Exception|Interrupt)\b", ln)]
    return lines[-1] if lines else text.splitlines()[0] if text else type(exc).__name__

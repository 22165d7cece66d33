"""Sums of small tensors across an RPC group through its direct channels (:mod:`.channel`): the gradients of
a GNN, every training step.

Every member sends its tensor to every other member (all in flight at once) and sums what it received in
member order, so every member holds the same bits. The peers' acknowledgements are collected one call later
(:meth:`ChannelSum.settle`). gloo's all-reduce of the same 10,000 floats took about
1 ms (0.7 ms of CPU) a call between 2 idle processes of this project's 2-core machine; an exchange over a
socket takes tens of microseconds. Each member sends ``members - 1`` copies, so the exchange is for small
tensors: :func:`fits` says when (larger ones go through the process group's all-reduce).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import torch

from ..ranks.context import DistError
from ..transport import channel
from .rpc import RpcGroup, collect, drop, register, registered, send_all

_MAILBOX = "reduce-mailbox"
# a member sends (members - 1) x the tensor's bytes a step: up to this, the exchange beats a ring all-reduce
EXCHANGE_BYTES = 16 << 20
_POLL = 0.1


def fits(group: RpcGroup | None, nbytes: int) -> bool:
    """Whether a sum of ``nbytes`` goes through the channels (:class:`ChannelSum`) in ``group``."""
    return group is not None and (group.world_size - 1) * nbytes <= EXCHANGE_BYTES


class _Mailbox:
    """Tensors deposited by other members, by step, until their receiver takes them."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.steps: dict[int, dict[int, torch.Tensor]] = {}

    def put(self, step: int, sender: int, data: torch.Tensor) -> None:
        with self.cond:
            self.steps.setdefault(step, {})[sender] = data
            self.cond.notify_all()

    def take(self, step: int, senders: list[int], timeout: float, check: Callable[[], None]) -> dict[int, torch.Tensor]:
        """The tensors of ``senders`` for ``step``, once all have arrived (at most ``timeout``; ``check`` runs
        every 0.1 s while waiting and may raise)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(got := self.steps.get(step, {})) < len(senders):
                if time.monotonic() > deadline:
                    missing = sorted(set(senders) - set(got))
                    raise DistError(f"no tensor from member(s) {missing} for step {step} after {timeout:.0f} s")
                self.cond.wait(_POLL)
                check()
            return self.steps.pop(step, {})


@channel.handler
def _deposit(key: str, step: int, sender: int, data: torch.Tensor) -> bool:
    """RPC handler: keep ``sender``'s tensor of ``step`` for this member's sum ``key``."""
    registered(f"{_MAILBOX}/{key}").put(step, sender, data)
    return True


class ChannelSum:
    """``sum(tensor)`` over the members of ``group``, through its channels; call on every member in the same
    order. Construction registers this member's mailbox: make one on every member before any calls it (a
    collective such as DDP's construction, or a barrier, in between)."""

    def __init__(self, group: RpcGroup, key: str):
        self.group, self.key, self.step = group, key, 0
        self._sent: tuple[list, str] | None = None  # the last call's deposits, not yet acknowledged
        self.mailbox = _Mailbox()
        register(f"{_MAILBOX}/{key}", self.mailbox)

    def __call__(self, tensor: torch.Tensor, check: Callable[[], None] = lambda: None) -> torch.Tensor:
        g, step = self.group, self.step
        self.step += 1
        me = g.rank
        peers = [m for m in range(g.world_size) if m != me]
        data = tensor.detach().contiguous()
        what = f"sum {self.key!r} (step {step})"
        self.settle()
        self._sent = send_all(g, [(g.names[m], _deposit, (self.key, step, me, data)) for m in peers], what), what
        try:
            got = self.mailbox.take(step, peers, g.timeout, check)
        except BaseException as exc:
            drop(fut for _, fut in self._sent[0])
            self._sent = None
            if isinstance(exc, DistError):
                raise DistError(f"{g.names[me]}: {what}: {exc}") from None
            raise
        got[me] = data
        out = got[0].clone()
        for m in range(1, g.world_size):  # member order, on every member: the same bits everywhere
            out += got[m]
        return out

    def settle(self) -> None:
        """Wait for the peers to acknowledge the last call's tensors. A call waits for the peers' tensors, not
        for the acknowledgements of its own: the next call collects those (or this method, at the end of an
        epoch), so a refused tensor is still reported, a step later, and a sum costs one trip across the
        network instead of a round trip behind other traffic."""
        if self._sent is not None:
            sent, what = self._sent
            self._sent = None
            collect(self.group, sent, what)

"""The ``GRAPHSHARD_*`` tuning settings a rank reads from its environment: a bad value is an
:class:`~graphshard.errors.InputError` naming the variable and what it takes."""

from __future__ import annotations

import os

from ...errors import InputError


def whole_number(name: str, top: int) -> int | None:
    """The whole number from 0 to ``top`` that the environment variable ``name`` holds, or None when it is
    unset or empty."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) > top:
        raise InputError(f"{name}={text!r}: expected a whole number from 0 to {top}")
    return int(text)


# The priority of the connections' requests (``SO_PRIORITY``; answers keep the default, 0). Every step waits on
# small requests (neighbour sampling, the IDs of the rows it needs, its gradient sum) while answers carry rows in
# bulk; a host whose outgoing queue honours priorities (pfifo_fast, prio, mqprio) sends the requests ahead of the
# rows queued for the link, and fq_codel keeps each connection apart anyway. 6 is TC_PRIO_INTERACTIVE, the
# highest a process may set without CAP_NET_ADMIN (pfifo_fast's first band). 2 emulated hosts at 1 Gbit/s,
# 128-d, behind pfifo_fast: gradient sync 1.7-2.6 s of the epoch against 2.6-3.3 s at 0 or behind a FIFO.
REQUEST_PRIORITY = 6
PRIORITY_ENV = "GRAPHSHARD_REQUEST_PRIORITY"


def request_priority() -> int:
    """The priority requests leave at: ``GRAPHSHARD_REQUEST_PRIORITY`` (0 to 6; 0: as every other socket's), else
    :data:`REQUEST_PRIORITY`."""
    priority = whole_number(PRIORITY_ENV, 6)
    return REQUEST_PRIORITY if priority is None else priority

"""Counters that several threads add to (a loader's batch builders, RPC handlers): the totals, read as a
plain dict, and each thread's own running share, so that a batch built in one thread counts only its own
rows and bytes while other threads build theirs."""

from __future__ import annotations

import threading


class Counts(dict):
    """``name -> int`` totals over every thread; :meth:`add` adds under a lock, :meth:`mine` is the calling
    thread's share. Pickles (to sampler worker processes) as its totals."""

    def __init__(self, *names: str, **values: int):
        super().__init__(dict.fromkeys(names, 0), **values)
        self._lock = threading.Lock()
        self._local = threading.local()

    def add(self, **amounts: int) -> None:
        """Add ``amounts`` to the totals and to this thread's share."""
        mine = self.mine()
        with self._lock:
            for name, n in amounts.items():
                self[name] += n
        for name, n in amounts.items():
            mine[name] = mine.get(name, 0) + n

    def mine(self) -> dict[str, int]:
        """What the calling thread has added (names it never added are absent)."""
        share = getattr(self._local, "share", None)
        if share is None:
            share = self._local.share = {}
        return share

    def __reduce__(self):
        return (_restored, (dict(self),))


def _restored(values: dict[str, int]) -> Counts:
    return Counts(**values)

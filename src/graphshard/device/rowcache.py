"""Feature rows kept on the device: the rows a rank's batches read most (its own and other partitions'), so
that a hit crosses neither the network nor PCIe.

The batch builder asks :meth:`DeviceRowCache.split` which of a batch's nodes the device holds, fetches only
the others, and hands the batch on with ``x`` holding the fetched rows alone and two index tensors,
``x_miss_pos`` and ``x_hit_pos``/``x_hit_slot``. Once those are on the device, :meth:`DeviceRowCache.fill`
makes the batch's whole ``x`` there: the fetched rows and the cached ones, each put in its place by index
(no host round trip, no synchronisation)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

MISS_POS, HIT_POS, HIT_SLOT, COUNT = "x_miss_pos", "x_hit_pos", "x_hit_slot", "x_rows"


@dataclass
class RowCounts:
    """Rows asked of the cache, rows it held (hits), and the bytes those hits did not move."""

    asked: int = 0
    hits: int = 0
    bytes_saved: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, asked: int, hits: int, nbytes: int) -> None:
        with self.lock:
            self.asked, self.hits, self.bytes_saved = self.asked + asked, self.hits + hits, self.bytes_saved + nbytes

    def take(self) -> tuple[int, int, int]:
        """The counts so far, and start again from zero."""
        with self.lock:
            out = (self.asked, self.hits, self.bytes_saved)
            self.asked = self.hits = self.bytes_saved = 0
        return out


class DeviceRowCache:
    """Rows of feature ``name`` of some nodes per type, on ``device``: ``ids[ntype]`` (sorted per-type IDs) and
    ``rows[ntype]`` in that order; ``counts[ntype]``: the type's node count (a slot per node of the type on the
    host, 4 bytes each, finds a node's row)."""

    def __init__(self, name: str, ids: dict[str, np.ndarray], rows: dict[str, torch.Tensor], counts: dict[str, int]):
        self.name, self.ids, self.rows = name, ids, rows
        self.counts = RowCounts()
        self.build_s = 0.0  # seconds spent choosing and loading the rows
        self.device = next((str(v.device) for v in rows.values()), "cpu")
        self._slots: dict[str, np.ndarray] = {}
        for t, cached in ids.items():
            slot = np.full(counts[t], -1, dtype=np.int32)
            slot[cached] = np.arange(cached.shape[0], dtype=np.int32)
            self._slots[t] = slot

    @property
    def num_rows(self) -> int:
        return sum(int(v.shape[0]) for v in self.ids.values())

    @property
    def nbytes(self) -> int:
        return sum(v.numel() * v.element_size() for v in self.rows.values())

    def holds(self, ntype: str) -> bool:
        return ntype in self.rows and self.rows[ntype].shape[0] > 0

    def split(self, ntype: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For rows of ``ids`` (per-type IDs of ``ntype``) in a batch: the positions held here and their slots,
        and the positions to fetch."""
        ids = np.asarray(ids, dtype=np.int64)
        slot = self._slots[ntype][ids] if self.holds(ntype) else np.full(ids.shape[0], -1, np.int32)
        hit = slot >= 0
        hit_pos = np.flatnonzero(hit)
        rows = self.rows.get(ntype)
        width = 0 if rows is None else rows[0].numel() * rows.element_size() if rows.shape[0] else 0
        self.counts.add(int(ids.shape[0]), int(hit_pos.shape[0]), int(hit_pos.shape[0]) * width)
        return hit_pos, slot[hit_pos].astype(np.int64), np.flatnonzero(~hit)

    def fill(self, store: Any, ntype: str | None) -> None:
        """Make ``store.x`` (on the device, the fetched rows only) the rows of all its nodes of ``ntype`` (None: the
        cache's only type), cached ones included; the index tensors go. A store the cache left alone is left as
        it is."""
        if HIT_POS not in store:
            return
        ntype = ntype if ntype is not None else next(iter(self.rows))
        fetched, n = store.x, int(store[COUNT])
        x = torch.empty((n, *fetched.shape[1:]), dtype=fetched.dtype, device=fetched.device)
        x.index_copy_(0, store[MISS_POS], fetched)
        x.index_copy_(0, store[HIT_POS], self.rows[ntype].index_select(0, store[HIT_SLOT]).to(fetched.dtype))
        store.x = x
        for key in (MISS_POS, HIT_POS, HIT_SLOT, COUNT):
            del store[key]


def cached_layout(store: Any, hit_pos: np.ndarray, hit_slot: np.ndarray, miss_pos: np.ndarray, *, count: int) -> None:
    """Record on a batch's node ``store`` where its cached rows go (see :meth:`DeviceRowCache.fill`)."""
    store[MISS_POS] = torch.from_numpy(miss_pos)
    store[HIT_POS] = torch.from_numpy(hit_pos)
    store[HIT_SLOT] = torch.from_numpy(hit_slot)
    store[COUNT] = count

"""What one process serves: one stored partition, or several consecutive ones seen as one.

A run of ``W`` server processes over ``P`` stored partitions serves every partition with ``W / P``
processes when ``P`` divides ``W`` (as before), and gives each process ``P / W`` consecutive partitions
when ``W`` divides ``P`` — e.g. 4 partitions made for 4 machines, trained now on 2 processes. The
partitions of one process are one contiguous range of node and edge IDs (and of per-type IDs), so the
runtime sees ``W`` partitions through a grouped partition book
(:meth:`~graphshard.book.RangePartitionBook.grouped`), while the data stays in the stored partitions'
memory-mapped files: nothing is merged or copied. Sampling, degrees, features and layer-wise inference
visit those files one after another.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import KW_ONLY, dataclass
from typing import Any

import numpy as np
import torch

from ...book import RangePartitionBook
from ...errors import FormatError, InputError
from ...format.config import PartitionConfig, as_config
from ...format.load import Partition, book_from_config, load_partition, verify_partition
from ...sparse import CSRRows, joined
from .base import Rows

log = logging.getLogger(__name__)


def stored_per_process(num_parts: int, servers: int) -> int:
    """Stored partitions each of ``servers`` processes serves: 1, or ``num_parts / servers`` when that
    is a whole number above 1. Raises :class:`InputError` when neither count divides the other."""
    if servers % num_parts == 0:
        return 1
    if num_parts % servers == 0:
        return num_parts // servers
    raise InputError(
        f"{servers} processes cannot serve {num_parts} partitions evenly: use a multiple or a divisor of {num_parts}"
    )


@dataclass
class Served:
    """The stored partitions ``parts`` (consecutive, from ``first``) one process serves as partition
    ``part_id`` of the runtime's ``book``; ``stored_book`` is the book of the files."""

    parts: list[Partition]
    book: RangePartitionBook
    stored_book: RangePartitionBook
    part_id: int
    _: KW_ONLY
    first: int

    @property
    def stored_ids(self) -> range:
        return range(self.first, self.first + len(self.parts))


def members_per_part(num_parts: int, world_size: int, lanes: int) -> int:
    """Members of a group of ``world_size`` (``lanes`` per server process) that serve each runtime partition
    of a graph stored in ``num_parts`` partitions."""
    return world_size // (num_parts // stored_per_process(num_parts, world_size // lanes))


def served_range(num_parts: int, world_size: int, lanes: int, rank: int) -> tuple[int, range]:
    """The runtime partition ID member ``rank`` of a group of ``world_size`` members (``lanes`` per server
    process) serves, and the stored partitions it is made of."""
    group = stored_per_process(num_parts, world_size // lanes)
    part_id = rank // members_per_part(num_parts, world_size, lanes)
    return part_id, range(part_id * group, (part_id + 1) * group)


def missing_files(cfg: PartitionConfig, world_size: int, lanes: int, rank: int) -> list[tuple[int, str]]:
    """``(stored partition, path)`` of every file member ``rank`` must serve that this host lacks (on a
    multi-host run each host holds only its own partitions' directories)."""
    _, stored = served_range(cfg.num_parts, world_size, lanes, rank)
    return [
        (p, str(cfg.part_path(p, key))) for p in stored for key in cfg.parts[p] if not cfg.part_path(p, key).is_file()
    ]


def verify_served(cfg: PartitionConfig, world_size: int, lanes: int, rank: int) -> str | None:
    """Check the files member ``rank`` serves against the config's checksums (only the first member of each
    partition hashes them: the others serve the same files). Returns the first failure's message, or None."""
    _, stored = served_range(cfg.num_parts, world_size, lanes, rank)
    if rank % members_per_part(cfg.num_parts, world_size, lanes):
        return None
    start, hashed = time.perf_counter(), 0
    try:
        for p in stored:
            hashed += verify_partition(cfg, p)
    except FormatError as exc:
        return str(exc)
    log.info(
        "verified partition(s) %d-%d against their checksums: %.0f MB in %.2f s",
        stored.start,
        stored.stop - 1,
        hashed / 1e6,
        time.perf_counter() - start,
    )
    return None


def load_served(part_config: str | os.PathLike | PartitionConfig, world_size: int, lanes: int, rank: int) -> Served:
    """Load what member ``rank`` of a group of ``world_size`` members (``lanes`` per server process)
    serves of the partitioned graph at ``part_config`` (its path, or the config already loaded)."""
    cfg = as_config(part_config)
    part_id, stored = served_range(cfg.num_parts, world_size, lanes, rank)
    group, first = len(stored), stored.start
    parts = [load_partition(cfg, p) for p in stored]
    stored_book = parts[0].partition_book if group == 1 else book_from_config(cfg)
    book = stored_book if group == 1 else stored_book.grouped(group, part_id)
    return Served(parts, book, stored_book, part_id, first=first)


class Stacked:
    """Rows of one feature held by consecutive stored partitions, read as one tensor (row ``i`` of the
    whole is row ``i - offset[k]`` of piece ``k``)."""

    def __init__(self, pieces: list[Any]):  # tensors, or CSRRows (read dense)
        self.pieces = pieces
        self.offsets = np.cumsum([0] + [p.shape[0] for p in pieces])
        self.shape = (int(self.offsets[-1]), *pieces[0].shape[1:])
        self.dtype = pieces[0].torch_dtype if isinstance(pieces[0], CSRRows) else pieces[0].dtype

    def read(self, rows: Rows) -> torch.Tensor:
        if isinstance(rows, int):
            k = int(np.searchsorted(self.offsets, rows, side="right")) - 1
            return self.pieces[k][rows - int(self.offsets[k])]
        if isinstance(rows, slice):
            rows = torch.arange(self.shape[0])[rows]
        ids = rows.numpy()
        piece = np.searchsorted(self.offsets, ids, side="right") - 1
        out = torch.empty((ids.shape[0], *self.shape[1:]), dtype=self.dtype)
        for k in np.unique(piece):
            pos = np.flatnonzero(piece == k)
            at, src = torch.from_numpy(ids[pos] - self.offsets[k]), self.pieces[k]
            out[torch.from_numpy(pos)] = src.read(at) if isinstance(src, CSRRows) else torch.index_select(src, 0, at)
        return out

    def nonzeros(self, rows: np.ndarray) -> tuple[torch.Tensor, ...]:
        """The non-zeros of CSR rows across the pieces, in the order of ``rows``."""
        piece = np.searchsorted(self.offsets, rows, side="right") - 1
        parts = [
            (pos, self.pieces[k].nonzeros(rows[pos] - self.offsets[k]))
            for k in np.unique(piece)
            for pos in [np.flatnonzero(piece == k)]
        ]
        return joined(parts, rows.shape[0], self.shape[1]).nonzeros(np.arange(rows.shape[0]))


# A stored feature as a store reads it: a (memory-mapped) tensor, CSR rows, or the rows of several partitions.
StoredTensor = torch.Tensor | CSRRows | Stacked


def stacked_feats(parts: list[Partition], kind: str) -> dict[str, StoredTensor]:
    """Each ``kind`` (``node_feats``/``edge_feats``) feature of ``parts``: the tensor itself for one part."""
    first = getattr(parts[0], kind)
    if len(parts) == 1:
        return dict(first)
    return {key: Stacked([getattr(p, kind)[key] for p in parts]) for key in first}

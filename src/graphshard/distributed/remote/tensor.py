"""``DistTensor``: a named tensor whose rows are sharded over partitions by the partition book (one row
per node of a type, or per edge of a type); any process reads and writes any rows by global ID."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ...book import RangePartitionBook
from ...errors import InputError
from ...ids import as_id_array, consecutive
from ..groups.rpc import RpcGroup, by_owner
from ..transport.channel import handler

_SHARDS: dict[str, Shard] = {}


class Shard:
    """The rows of one partition, held by that partition's first process; writes are serialised."""

    def __init__(self, rows: torch.Tensor, to_local: Callable[[np.ndarray], np.ndarray]):
        self.rows, self.to_local, self.lock = rows, to_local, threading.Lock()
        self.state: dict[str, torch.Tensor] = {}  # optimiser state (see embedding.py)
        self.pending: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # gradients staged per rank

    def index(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.to_local(ids.numpy()))


def shard(name: str) -> Shard:
    if name not in _SHARDS:
        raise InputError(f"no DistTensor named {name!r} in this process")
    return _SHARDS[name]


def local_shard(name: str) -> Shard | None:
    """This process's shard of DistTensor ``name``, or None where another process holds it."""
    return _SHARDS.get(name)


@handler
def _read(name: str, ids: torch.Tensor) -> torch.Tensor:
    s = shard(name)
    return torch.index_select(s.rows, 0, s.index(ids))


@handler
def _write(name: str, ids: torch.Tensor, values: torch.Tensor) -> None:
    s = shard(name)
    at = s.to_local(ids.numpy())
    run = consecutive(at)
    with s.lock:
        if run is not None:
            s.rows[run] = values  # a run of consecutive rows: one block copy
        else:
            s.rows[torch.from_numpy(at)] = values.to(s.rows.dtype)


class DistTensor:
    """A tensor of one row per node of ``ntype`` (or edge of ``etype``), sharded like them.

    Any process reads (``t[ids]``) and writes (``t[ids] = values``) any rows by global per-type ID.
    Construction is collective over ``group`` (every member creates the same tensor, in the same order).

    Args:
        group: the RPC group whose members hold the partitions (a session's ``group``).
        book: the graph's partition book.
        shape: the tensor's shape; ``shape[0]`` is the number of nodes of ``ntype`` (or edges of
            ``etype``).
        dtype: the rows' dtype.
        name: the tensor's name, unique in the process (requests name it).
        ntype: the node type the rows belong to; None: every node (homogeneous IDs).
        etype: an edge type: rows belong to its edges instead of to nodes.
        init: ``init(shape, dtype)`` makes each shard's initial rows; None: zeros.

    Raises:
        InputError: ``shape[0]`` is not the number of nodes (edges) of the type, or a tensor of that name
            exists already.
    """

    def __init__(
        self,
        group: RpcGroup,
        book: RangePartitionBook,
        shape: tuple[int, ...],
        dtype: torch.dtype,
        *,
        name: str,
        ntype: str | None = None,
        etype: Any = None,
        init: Callable[[tuple[int, ...], torch.dtype], torch.Tensor] | None = None,
    ):
        self.group, self.book, self.name, self.dtype = group, book, name, dtype
        self.shape = tuple(int(s) for s in shape)
        self.ntype, self.etype = ntype, etype
        total = book.num_edges(etype) if etype is not None else book.num_nodes(ntype)
        if not self.shape or self.shape[0] != total:
            raise InputError(
                f"DistTensor {name!r}: shape[0] must be {total} (the number of "
                f"{'edges' if etype is not None else 'nodes'} of its type), got {self.shape}"
            )
        p = group.part_id(book.num_partitions())
        self._owner = group.owner(p, book.num_partitions()) == group.names[group.rank]
        if self._owner:
            if name in _SHARDS:
                raise InputError(f"a DistTensor named {name!r} exists already")
            lo, hi = (
                self.book.edge_range(p, self.etype) if self.etype is not None else self.book.node_range(p, self.ntype)
            )
            count = hi - lo
            rows = (
                init((count, *self.shape[1:]), dtype)
                if init is not None
                else torch.zeros((count, *self.shape[1:]), dtype=dtype)
            )
            _SHARDS[name] = Shard(rows.to(dtype).contiguous(), lambda ids: self._local(ids, p))
        group.barrier(f"DistTensor {name!r} created")

    def _local(self, ids: np.ndarray, p: int) -> np.ndarray:
        if self.etype is not None:
            return self.book.eid2localeid(ids, p, self.etype).numpy()
        return self.book.nid2localnid(ids, p, self.ntype).numpy()

    def owners(self, ids: np.ndarray) -> np.ndarray:
        """The partition that owns each of ``ids`` (rows of this tensor).

        Args:
            ids: row IDs: per-type IDs of the tensor's node (edge) type.

        Returns:
            The owning partition of each row.

        Raises:
            IDRangeError: an ID out of range.
        """
        if self.etype is not None:
            return self.book.eid2partid(ids, self.etype).numpy()
        return self.book.nid2partid(ids, self.ntype).numpy()

    def __len__(self) -> int:
        return self.shape[0]

    def _ids(self, ids: Any) -> np.ndarray:
        return as_id_array(ids, f"row IDs of DistTensor {self.name!r}")

    def _route(self, ids: np.ndarray, remote: Callable[..., Any], args: Callable[[np.ndarray], tuple], what: str):
        return by_owner(
            self.group, self.owners(ids), self.book.num_partitions(), None, remote=remote, args=args, what=what
        )

    def __getitem__(self, ids: Any) -> torch.Tensor:
        ids_np = self._ids(ids)
        pieces = self._route(
            ids_np, _read, lambda pos: (self.name, torch.from_numpy(ids_np[pos])), f"DistTensor {self.name!r} read"
        )
        if len(pieces) == 1 and pieces[0][0].shape[0] == ids_np.shape[0]:  # one owner: rows already in order
            return pieces[0][1]
        out = torch.empty((ids_np.shape[0], *self.shape[1:]), dtype=self.dtype)
        for pos, rows in pieces:
            out.index_copy_(0, torch.from_numpy(pos), rows.to(self.dtype))
        return out

    def __setitem__(self, ids: Any, values: Any) -> None:
        ids_np = self._ids(ids)
        values = torch.as_tensor(values, dtype=self.dtype).expand((ids_np.shape[0], *self.shape[1:]))
        whole = lambda pos: pos.shape[0] == ids_np.shape[0] and values.is_contiguous()  # noqa: E731  (one owner)
        self._route(
            ids_np,
            _write,
            lambda pos: (
                self.name,
                torch.from_numpy(ids_np[pos]),
                values if whole(pos) else values[torch.from_numpy(pos)],
            ),
            f"DistTensor {self.name!r} write",
        )

    def free(self) -> None:
        """Drop this tensor's rows (collective: every member calls it once nobody reads the rows any more)."""
        self.group.barrier(f"DistTensor {self.name!r} freed")
        _SHARDS.pop(self.name, None)

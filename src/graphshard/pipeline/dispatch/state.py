"""What every rank knows before it reads an edge: the options, the chunked graph's metadata, the node
assignment and renumbering (O(N) integers), and which rank owns which partition."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from pathlib import Path

import numpy as np

from ...chunked.spec import ChunkedMeta, read_metadata
from ...distributed.ranks.context import DistContext
from ...format.config import check_graph_name
from ...partition.halo import check_hops
from ...partition.relabel import relabel_nodes
from ..assignment_files import read_assignment


@dataclass(frozen=True)
class DispatchOptions:
    """Inputs, output and options of the dispatch step."""

    in_dir: Path
    partitions_dir: Path
    out_dir: Path
    num_hops: int = 1
    _: KW_ONLY
    save_orig_nids: bool = False
    save_orig_eids: bool = False
    overwrite: bool = False
    memory: int = 0  # bytes the ranks on one machine may use together (0: the machine's memory)
    check_disk: bool = True  # refuse a run whose partitions are predicted not to fit the free space of out_dir
    feat_dtype: str | None = None  # floating-point features stored as "float16" or "bfloat16" (None: as given)


def owner_rank(partition: np.ndarray, world: int) -> np.ndarray:
    """The rank owning each partition: partition ``p`` belongs to rank ``p % world``."""
    return partition % world


def owned_partitions(num_parts: int, rank: int, world: int) -> list[int]:
    """The partitions ``rank`` builds and writes, in increasing order."""
    return [p for p in range(num_parts) if p % world == rank]


def chunk_share(count: int, rank: int, world: int) -> range:
    """The contiguous share of ``count`` chunks that ``rank`` reads."""
    return range(count * rank // world, count * (rank + 1) // world)


def phase_groups(num_parts: int, world: int, num_hops: int) -> list[list[int]]:
    """Groups of partitions built together. With 1-hop HALO, one partition per rank at a time
    (memory: one partition's data); deeper HALOs need every partition's in-edges, so one group."""
    if num_hops > 1:
        return [list(range(num_parts))]
    return [list(range(k, min(k + world, num_parts))) for k in range(0, num_parts, world)]


@dataclass
class DispatchState:
    """The read-only state of one rank. ``parts``/``new2old``/``old2new`` are int32 below 2**31 nodes."""

    opts: DispatchOptions
    ctx: DistContext
    meta: ChunkedMeta
    num_parts: int
    _: KW_ONLY
    parts: np.ndarray  # original homogeneous node ID -> partition
    node_off: np.ndarray  # first homogeneous node ID of each node type (NT + 1)
    edge_off: np.ndarray  # first homogeneous edge ID of each edge type (ET + 1)
    new2old: np.ndarray
    old2new: np.ndarray
    node_bounds: np.ndarray  # (P, NT + 1), see Relabelling

    @classmethod
    def load(cls, opts: DispatchOptions, ctx: DistContext) -> DispatchState:
        """Read the metadata and the assignment, and renumber the nodes as ``partition_graph`` does."""
        check_hops(opts.num_hops)
        meta = read_metadata(opts.in_dir)
        check_graph_name(meta.graph_name)
        per_type, num_parts = read_assignment(opts.partitions_dir, meta.num_nodes)
        parts = np.concatenate([per_type[t] for t in meta.ntypes]) if per_type else np.zeros(0, np.int64)
        ids = meta.id_converter()
        new2old, old2new, node_bounds = relabel_nodes(parts, num_parts, ids.node_offsets)
        if int(ids.node_offsets[-1]) < 2**31:  # every rank holds these three: keep them narrow
            parts, new2old, old2new = (a.astype(np.int32) for a in (parts, new2old, old2new))
        return cls(
            opts,
            ctx,
            meta,
            num_parts,
            parts=parts,
            node_off=ids.node_offsets,
            edge_off=ids.edge_offsets,
            new2old=new2old,
            old2new=old2new,
            node_bounds=node_bounds,
        )

    @property
    def name(self) -> str:
        return self.meta.graph_name

    @property
    def num_nodes(self) -> int:
        return int(self.node_off[-1])

    @property
    def out(self) -> Path:
        return Path(self.opts.out_dir).resolve()

    @property
    def owned(self) -> list[int]:
        return owned_partitions(self.num_parts, self.ctx.rank, self.ctx.world_size)

    def part_starts(self) -> np.ndarray:
        """First new node ID of each partition, and the node count last (P + 1)."""
        return np.append(self.node_bounds[:, 0], self.num_nodes)

    def part_nodes(self, p: int) -> tuple[int, int]:
        """``[start, end)`` of partition ``p``'s new node IDs."""
        return int(self.node_bounds[p, 0]), int(self.node_bounds[p, -1])

    def phases(self) -> list[list[int]]:
        return phase_groups(self.num_parts, self.ctx.world_size, self.opts.num_hops)

    def mine(self, phase: list[int]) -> list[int]:
        """This rank's partitions in ``phase``."""
        return [p for p in phase if p % self.ctx.world_size == self.ctx.rank]

    def in_phase(self, phase: list[int]) -> np.ndarray:
        """Boolean mask over partitions: which are in ``phase``."""
        mask = np.zeros(self.num_parts, dtype=bool)
        mask[phase] = True
        return mask

    def my_chunks(self, count: int) -> range:
        return chunk_share(count, self.ctx.rank, self.ctx.world_size)

    def owner_rank(self, partition: np.ndarray) -> np.ndarray:
        return owner_rank(partition, self.ctx.world_size)

"""Co-located partitions: those served by other processes of this host whose files this process sees too.

A process reads such a partition itself — its neighbour samples and its stored feature rows — from the same
memory-mapped files, so the pages are shared through the page cache, nothing is copied, and no request
crosses a socket. DGL's trainers read their own machine's partition from shared memory in the same way.

A partition counts as co-located only when its server runs on this host (same kernel boot and same network
namespace, so emulated hosts on one machine stay apart) and every one of its files, at the path this
process's partition config gives, is the very file the server loaded (same device, inode, size and
modification time). Only read-only data is read this way: rows written at run time (``DistTensor``,
``DistEmbedding``, degree counts) always go to their owner.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from pathlib import Path

from ...format.config import PartitionConfig
from ..groups.rpc import RpcGroup
from ..stores.partitions import Served, load_served, members_per_part, served_range

log = logging.getLogger(__name__)

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_NET_NS = Path("/proc/self/ns/net")


def host_key() -> str:
    """What tells this host apart: host name, kernel boot, and network namespace (where the system has them)."""
    try:
        boot = _BOOT_ID.read_text().strip()
    except OSError:
        boot = ""
    try:
        net = os.stat(_NET_NS).st_ino
    except OSError:
        net = 0
    return f"{socket.gethostname()}/{boot}/{net}"


def file_marks(cfg: PartitionConfig, stored: range) -> list[list[int]] | None:
    """``[device, inode, size, mtime_ns]`` of every file of the ``stored`` partitions as this process sees them
    (partition by partition, files by kind), or None when one is missing."""
    marks = []
    for p in stored:
        for key in sorted(cfg.parts[p]):
            try:
                st = os.stat(cfg.part_path(p, key))
            except OSError:
                return None
            marks.append([st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns])
    return marks


def colocated_parts(cfg: PartitionConfig, group: RpcGroup) -> list[int]:
    """The runtime partitions (other than this member's) that this member can read itself: their servers run
    on this host and loaded the very files this member's config names. Collective over ``group``."""
    world, lanes, me = group.world_size, group.lanes, group.rank
    mine, stored = served_range(cfg.num_parts, world, lanes, me)
    mark = {"host": host_key(), "files": file_marks(cfg, stored)}
    near: set[int] = set()
    for member, raw in enumerate(group.all_gather(json.dumps(mark).encode(), "co-located partitions")):
        seen = json.loads(raw)
        part, theirs = served_range(cfg.num_parts, world, lanes, member)
        if part == mine or part in near or seen["host"] != mark["host"] or not seen["files"]:
            continue
        if file_marks(cfg, theirs) == seen["files"]:
            near.add(part)
    return sorted(near)


def load_colocated(cfg: PartitionConfig, group: RpcGroup, on: bool = True) -> dict[int, Served]:
    """What the first server of each co-located partition (:func:`colocated_parts`) serves, loaded (memory-mapped)
    in this process, by runtime partition; nothing when not ``on``. Collective over ``group`` when ``on``."""
    if not on:
        return {}
    parts = colocated_parts(cfg, group)
    per_part = members_per_part(cfg.num_parts, group.world_size, group.lanes)
    loaded = {p: load_served(cfg, group.world_size, group.lanes, p * per_part) for p in parts}
    if loaded:
        log.info("%s reads partition(s) %s itself (co-located, same files)", group.names[group.rank], parts)
    return loaded

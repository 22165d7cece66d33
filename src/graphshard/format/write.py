"""Atomic writing of a partitioned graph: files go to a staging directory, then into place, JSON last."""

from __future__ import annotations

import logging
import os
import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GraphshardError
from .config import PartitionConfig, write_config
from .outputs import MARKER, claim_for_graph, prepare_output_dir, write_failure
from .sparse import stored_tensors
from .staging import missing_ancestors, naming, remove_empty_dirs
from .tensorfile import Lazy, write_tensors

log = logging.getLogger(__name__)

FILE_NAMES = {
    "part_graph": "graph.safetensors",
    "node_feats": "node_feats.safetensors",
    "edge_feats": "edge_feats.safetensors",
    "orig_nids": "orig_nids.safetensors",
    "orig_eids": "orig_eids.safetensors",
}


def part_entry(files: dict[str, str]) -> dict[str, str]:
    """A ``part-<i>`` config entry with its keys in canonical order."""
    return {k: files[k] for k in FILE_NAMES if k in files}


def staging_prefix(graph_name: str) -> str:
    """Name prefix of the hidden staging directories of runs writing ``graph_name``."""
    return f".staging-{graph_name}-"


def replace_dir(staged: Path, final: Path, trash: Path) -> None:
    """Move ``staged`` to ``final``, moving a previous ``final`` to ``trash`` first."""
    if final.exists():
        shutil.rmtree(trash, ignore_errors=True)
        final.rename(trash)
    staged.rename(final)


class PartitionWriter:
    """Stage partition files under ``out_dir`` and publish them atomically with :meth:`commit`.

    ``out_dir`` must be new, empty or an earlier partition output (see :mod:`.outputs`) and may hold
    only this graph's partitions, unless ``overwrite``.
    Until the config JSON is written nothing looks complete: an interrupted run leaves at most a
    hidden staging directory (removed by the next run for the same graph name) and no JSON.
    Use as a context manager; an exception discards the staged files (and the directory, if this writer
    created it), and an ``OSError`` (a full disk) becomes a :class:`WriteError` naming the file.

    Files are written on a background thread (write-behind) so I/O and hashing overlap with
    building the next partition; at most one file is pending, which bounds the extra memory.
    """

    def __init__(
        self, out_dir: str | os.PathLike, graph_name: str, overwrite: bool = False, *, identity: PartitionConfig
    ):
        if not identity.run_fingerprint or identity.graph_name != graph_name:
            raise ValueError("PartitionWriter needs the run's config (with its fingerprint) for this graph")
        self._created = missing_ancestors(Path(out_dir).expanduser().resolve())  # removed again if we fail
        self.out_dir = prepare_output_dir(out_dir, "partitions", overwrite)
        claim_for_graph(self.out_dir, graph_name, overwrite)
        prefix = staging_prefix(graph_name)
        for stale in self.out_dir.glob(prefix + "*"):
            log.info("removing staging directory of an interrupted run: %s", stale)
            shutil.rmtree(stale, ignore_errors=True)
        self.staging = self.out_dir / f"{prefix}{os.getpid()}"
        self.staging.mkdir()
        self.identity = identity  # every file records which run and partition wrote it
        self.checksums: dict[str, str] = {}
        self.parts: dict[int, dict[str, str]] = {}
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="graphshard-writer")
        self._pending: Future | None = None

    def __enter__(self) -> PartitionWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if self._pending is not None and exc_type is None:
                self._pending.result()
        finally:
            self._pool.shutdown(wait=True)
            if exc_type is not None or self.staging.exists():
                shutil.rmtree(self.staging, ignore_errors=True)
            if exc_type is not None and self._created:
                self._remove_if_only_marker()
        if isinstance(exc, OSError) and not isinstance(exc, GraphshardError):
            raise write_failure(exc, self.out_dir, self.staging, self.out_dir) from exc

    def _remove_if_only_marker(self) -> None:
        """Directories this writer created for a run that failed go again (if nothing else came in)."""
        if [p.name for p in self.out_dir.iterdir()] == [MARKER]:
            (self.out_dir / MARKER).unlink(missing_ok=True)
            remove_empty_dirs(self._created)

    def write_file(self, part_id: int, key: str, tensors: dict[str, Any]) -> None:
        """Stage file ``key`` of partition ``part_id`` (written in the background; errors surface on
        the next call or at :meth:`commit`)."""
        rel = f"part{part_id}/{FILE_NAMES[key]}"
        tensors = stored_tensors(tensors)  # sparse features as their three CSR tensors
        target = self.staging / rel
        target.parent.mkdir(exist_ok=True)
        self.parts.setdefault(part_id, {})[key] = rel
        self._wait()
        self._pending = self._pool.submit(self._write, rel, target, tensors, self.identity.identity(part_id, key))

    def _write(self, rel: str, target: Path, tensors: dict[str, np.ndarray | Lazy], meta: dict[str, str]) -> None:
        with naming(target):
            self.checksums[rel] = write_tensors(target, tensors, meta)

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def commit(self, cfg: PartitionConfig) -> PartitionConfig:
        """Move the staged partitions into ``out_dir`` and write the config JSON last."""
        self._wait()
        if cfg.run_fingerprint != self.identity.run_fingerprint:
            raise ValueError("the committed config is not the one whose identity the files carry")
        cfg = replace(
            cfg,
            parts=[part_entry(self.parts[p]) for p in range(cfg.num_parts)],
            checksums=dict(sorted(self.checksums.items())),
        )
        if cfg.path.exists():
            cfg.path.unlink()  # an old config must never describe a mix of old and new files
        for p in range(cfg.num_parts):
            replace_dir(self.staging / f"part{p}", self.out_dir / f"part{p}", self.staging / f"replaced-part{p}")
        with naming(cfg.path):
            write_config(cfg)
        shutil.rmtree(self.staging, ignore_errors=True)
        return cfg

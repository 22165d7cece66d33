"""The config and publishing: the config template (known before any file is written, so every file can
carry its identity), and, once every rank has written its partitions, moving them into the output
directory, checking that they load, and writing the config JSON last."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np

from ...chunked.readers import read_data
from ...chunked.spec import ChunkedMeta, FileSpec
from ...distributed.ranks.collectives import all_gather_bytes, barrier
from ...format.config import PartitionConfig, Schema, feature_schema, write_config
from ...format.feat_dtype import feat_dtype_entry, stored_dtype
from ...format.load import load_partition
from ...format.write import FILE_NAMES, part_entry, replace_dir
from ...graph import etype_str
from ...partition.relabel import Relabelling
from ..assignment_files import read_partition_meta
from .resume import ResumeArea
from .state import DispatchState


def config_template(state: DispatchState, rl: Relabelling, config_path: Path) -> PartitionConfig:
    """The config without its file lists and checksums."""
    meta = state.meta
    return PartitionConfig(
        path=config_path,
        graph_name=state.name,
        part_method=part_method(state.opts.partitions_dir),
        num_parts=state.num_parts,
        halo_hops=state.opts.num_hops,
        num_nodes=state.num_nodes,
        num_edges=int(state.edge_off[-1]),
        ntypes={t: i for i, t in enumerate(meta.ntypes)},
        etypes={etype_str(e): i for i, e in enumerate(meta.etypes)},
        node_map={t: rl.node_map()[i] for i, t in enumerate(meta.ntypes)},
        edge_map={etype_str(e): rl.edge_map()[i] for i, e in enumerate(meta.etypes)},
        parts=[],
        extra={"num_trainers_per_machine": 1, **feat_dtype_entry(state.opts.feat_dtype)},
        feature_schema=dispatched_schema(meta, state.opts.feat_dtype),
    ).with_fingerprint()


def dispatched_schema(meta: ChunkedMeta, feat_dtype: str | None = None) -> Schema:
    """Names, dtypes and row shapes of the features dispatch writes (as it allocates them: from chunk 0;
    floating point in ``feat_dtype`` when given)."""

    def spec(f: FileSpec) -> tuple[np.dtype, tuple[int, ...]]:
        sample = np.asarray(read_data(f, 0)[:0])
        return stored_dtype(sample.dtype, feat_dtype), sample.shape[1:]

    node = {f"{t}/{name}": spec(f) for t in meta.ntypes for name, f in meta.node_data.get(t, {}).items()}
    edge = {f"{etype_str(et)}/{name}": spec(f) for et in meta.etypes for name, f in meta.edge_data.get(et, {}).items()}
    return feature_schema(node, edge)


def part_method(partitions_dir: Path) -> str:
    """The method recorded by the assignment step (``explicit`` when none is)."""
    meta = read_partition_meta(partitions_dir)
    if meta is not None:
        return str(meta.get("method", "explicit"))
    return "explicit"


def final_config(template: PartitionConfig, markers: dict[int, dict]) -> PartitionConfig:
    """The template with every partition's file list and the checksums from the markers of all partitions."""
    p_all = range(template.num_parts)
    keys = {p: [k for k in FILE_NAMES if k in markers[p]["files"]] for p in p_all}
    return replace(
        template,
        parts=[part_entry({k: f"part{p}/{FILE_NAMES[k]}" for k in keys[p]}) for p in p_all],
        checksums=dict(sorted(c for p in p_all for c in markers[p]["checksums"].items())),
    )


def publish(state: DispatchState, resume: ResumeArea, template: PartitionConfig) -> None:
    """Move this rank's finished partitions into the output, then (all ranks) check they load and write the
    config; the resume area is removed at the end (a collective)."""
    ctx, mine = state.ctx, {}
    for p in state.owned:
        mine[p] = resume.read_marker(p)
        replace_dir(resume.part_dir(p), state.out / f"part{p}", resume.trash_dir(p))
    markers = {}
    for blob in all_gather_bytes(ctx, json.dumps(mine).encode(), "partition checksums"):
        markers.update({int(k): v for k, v in json.loads(blob).items()})
    cfg = final_config(template, markers)
    barrier(ctx, "partitions published")
    check_loads(cfg, state.owned, ctx.rank)
    barrier(ctx, "partitions validated")
    write_config(cfg)
    for p in state.owned:
        resume.marker(p).unlink(missing_ok=True)
        shutil.rmtree(resume.trash_dir(p), ignore_errors=True)
    barrier(ctx, "config written")
    shutil.rmtree(resume.root, ignore_errors=True)  # every rank is past the barrier: nothing in it is needed


def check_loads(cfg: PartitionConfig, owned: list[int], rank: int) -> None:
    """Load (with the default validation) every partition this rank wrote, through a private copy of the
    config: a run reports success only for output that loads, and never publishes a config that does not."""
    for stale in cfg.path.parent.glob(f".{cfg.path.name}.check-{rank}-*"):  # left by a run killed while checking
        stale.unlink(missing_ok=True)
    probe = replace(cfg, path=cfg.path.with_name(f".{cfg.path.name}.check-{rank}-{os.getpid()}"))
    write_config(probe)
    try:
        for p in owned:
            load_partition(probe.path, p)
    finally:
        probe.path.unlink(missing_ok=True)

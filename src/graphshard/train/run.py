"""Entry point: train on a partition config (or a dataset, partitioned first) on a local cluster of
``num_procs`` processes, or as one rank of a ``torchrun`` job."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from .options import TrainOptions

log = logging.getLogger(__name__)


def _rank_main(opts: TrainOptions, result_path: str | None) -> dict[str, Any]:
    from ..dist.runtime import session
    from .link import train_link
    from .node import train_node

    rank = os.environ.get("RANK", "0")
    logging.basicConfig(level=logging.INFO if os.environ.get("GRAPHSHARD_LOG") == "info" else logging.WARNING,
                        format=f"%(asctime)s [rank {rank}] %(levelname)s %(name)s: %(message)s", force=True)
    with session(timeout=opts.timeout) as s:
        metrics = (train_link if opts.task == "link" else train_node)(s, opts)
        if s.rank == 0:
            for path in filter(None, (opts.metrics_out, result_path)):
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                tmp = Path(path).with_name(f".{Path(path).name}.tmp")
                tmp.write_text(json.dumps(metrics, indent=1))
                os.replace(tmp, path)
    return metrics


def partition_dataset(dataset: str, out_dir: str, num_parts: int, method: str = "metis", seed: int = 0,
                      link: bool = False) -> tuple[str, str | None]:
    """Partition a dataset directory (shared-data layout) unless ``out_dir`` holds it already; returns the
    partition config and, with ``link``, the held-out edges file. Heterogeneous graphs get reverse edge
    types (see :func:`graphshard.graph.with_reverse_edges`) so messages flow both ways; with ``link`` the
    validation/test edges leave the graph before it is partitioned."""
    from ..datasets import load_dataset
    from ..graph import with_reverse_edges
    from ..partition.api import partition_graph
    from .link_split import save_link_split, split_edges

    out = Path(out_dir) / ("link" if link else "node")
    name = "".join(c if c.isalnum() else "_" for c in Path(dataset).resolve().name)
    config = out / f"{name}.json"
    split_file = out / "link_split.safetensors" if link else None
    if not config.is_file():
        ds = load_dataset(dataset)
        g = ds.graph
        if link:
            g, held_out = split_edges(g, seed=seed)
            save_link_split(held_out, split_file)
        if not g.is_homogeneous:
            g = with_reverse_edges(g)
        partition_graph(g, name, num_parts, out, part_method=method, seed=seed)
    return str(config), None if split_file is None else str(split_file)


def train(opts: TrainOptions, num_procs: int | None = None, dataset: str | None = None,
          work_dir: str = "out/train", part_method: str = "metis", host: str = "127.0.0.1") -> dict[str, Any]:
    """Train as ``opts`` says and return the metrics. ``num_procs``: start that many local ranks (one
    partition each); None: this process is one rank of a torchrun job. ``dataset``: partition it into
    ``work_dir`` first (into ``num_procs`` parts, or ``WORLD_SIZE`` under torchrun)."""
    opts.check()
    if dataset:
        parts = num_procs or int(os.environ.get("WORLD_SIZE", "1"))
        config, split = partition_dataset(dataset, f"{work_dir}/{parts}parts-{part_method}", parts, part_method,
                                          opts.seed, link=opts.task == "link")
        opts = replace(opts, part_config=config, link_split=split or opts.link_split)
    if not num_procs:
        return _rank_main(opts, None)
    from ..dist.launch import launch

    with tempfile.TemporaryDirectory() as tmp:
        result = str(Path(tmp) / "metrics.json")
        launch(_rank_main, num_procs, (opts, result), host, opts.timeout)
        return json.loads(Path(result).read_text())

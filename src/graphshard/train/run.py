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
    from .node import train_node

    rank = os.environ.get("RANK", "0")
    logging.basicConfig(level=logging.INFO if os.environ.get("GRAPHSHARD_LOG") == "info" else logging.WARNING,
                        format=f"%(asctime)s [rank {rank}] %(levelname)s %(name)s: %(message)s", force=True)
    with session(timeout=opts.timeout) as s:
        metrics = train_node(s, opts)
        if s.rank == 0:
            for path in filter(None, (opts.metrics_out, result_path)):
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                tmp = Path(path).with_name(f".{Path(path).name}.tmp")
                tmp.write_text(json.dumps(metrics, indent=1))
                os.replace(tmp, path)
    return metrics


def partition_dataset(dataset: str, out_dir: str, num_parts: int, method: str = "metis", seed: int = 0) -> str:
    """Partition a dataset directory (shared-data layout) unless ``out_dir`` holds it already."""
    from ..datasets import load_dataset
    from ..partition.api import partition_graph

    ds = load_dataset(dataset)
    config = Path(out_dir) / f"{ds.name}.json"
    if not config.is_file():
        partition_graph(ds.graph, ds.name, num_parts, out_dir, part_method=method, seed=seed)
    return str(config)


def train(opts: TrainOptions, num_procs: int | None = None, dataset: str | None = None,
          work_dir: str = "out/train", part_method: str = "metis", host: str = "127.0.0.1") -> dict[str, Any]:
    """Train as ``opts`` says and return the metrics. ``num_procs``: start that many local ranks (one
    partition each); None: this process is one rank of a torchrun job. ``dataset``: partition it into
    ``work_dir`` first (into ``num_procs`` parts, or ``WORLD_SIZE`` under torchrun)."""
    opts.check()
    if dataset:
        parts = num_procs or int(os.environ.get("WORLD_SIZE", "1"))
        opts = replace(opts, part_config=partition_dataset(dataset, f"{work_dir}/{parts}parts-{part_method}", parts,
                                                          part_method, opts.seed))
    if not num_procs:
        return _rank_main(opts, None)
    from ..dist.launch import launch

    with tempfile.TemporaryDirectory() as tmp:
        result = str(Path(tmp) / "metrics.json")
        launch(_rank_main, num_procs, (opts, result), host, opts.timeout)
        return json.loads(Path(result).read_text())

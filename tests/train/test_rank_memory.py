"""A rank's memory in node training grows with its own partition, not with the graph (issue 28): two graphs that
differ only in the size of the other partition cost rank 0 the same, measured as the process's peak resident
memory while it works out its split nodes, their labels, the class count and its share of every node's outputs.
Reading every label and mask of the graph, as ranks once did, costs ~19 bytes per node of the whole graph."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from graphshard import Graph, partition_graph
from graphshard.distributed.ranks.launcher import launch
from tests.memory import needs_peak_reset, peak_rss, restart_peak

OWN = 20_000  # nodes of partition 0, the only ones in a split
OTHER = {"small": 20_000, "large": 2_000_000}  # nodes of partition 1: O(total nodes) per rank would add ~38 MB


def _graph(other: int, out: Path) -> tuple[str, dict[str, int]]:
    """Two rings, one per partition (no edge between them), with labels and split masks everywhere (the other
    partition's masks all false)."""
    n = OWN + other
    ring = [np.arange(k) for k in (OWN, other)]
    src = np.concatenate([ring[0], OWN + ring[1]])
    dst = np.concatenate([(ring[0] + 1) % OWN, OWN + (ring[1] + 1) % other])
    rng = np.random.default_rng(0)
    mine, draw = np.arange(n) < OWN, rng.random(n)
    feats = {
        "feat": np.zeros((n, 2), dtype=np.float32),
        "label": rng.integers(0, 3, n),
        "train_mask": mine & (draw < 0.6),
        "val_mask": mine & (draw >= 0.6) & (draw < 0.8),
        "test_mask": mine & (draw >= 0.8),
    }
    partition_graph(Graph.from_arrays(src, dst, n, node_feats=feats), "g", 2, out, part_method=(~mine).astype(np.int64))
    return str(out / "g.json"), {k.removesuffix("_mask"): int(v.sum()) for k, v in feats.items() if k.endswith("mask")}


def _worker(config: str, out: str) -> None:
    from graphshard.distributed.runtime.session import session
    from graphshard.tasks.embeddings import my_share
    from graphshard.tasks.loop import open_graph
    from graphshard.tasks.node import node_task
    from graphshard.tasks.options import TrainOptions

    opts = TrainOptions(part_config=config, progress=False)
    with session(timeout=60) as s:
        g = open_graph(opts)
        my_share(s, g, "_N")  # warm: the first collectives and fetches allocate their buffers once
        before = restart_peak()
        task = node_task(s, g, opts)
        share = my_share(s, g, "_N")
        growth = peak_rss() - before
        sizes = {k: int(v.numel()) for k, v in task.split.items()}
        record = {"growth": growth, "split": sizes, "share": int(share.numel()), "classes": task.classes}
        Path(out, f"rank{s.rank}.json").write_text(json.dumps(record))


@needs_peak_reset
def test_rank_memory_does_not_grow_with_the_other_partition(tmp_path):
    seen = {}
    for name, other in OTHER.items():
        out = tmp_path / name
        config, counts = _graph(other, out)
        launch(_worker, 2, (config, str(out)), timeout=120)
        ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
        for k, count in counts.items():  # the partition's split nodes, dealt evenly between the ranks
            assert sorted(r["split"][k] for r in ranks) == [count // 2, count - count // 2]
        assert sorted(r["share"] for r in ranks) == [(OWN + other) // 2, OWN + other - (OWN + other) // 2]
        seen[name] = ranks
    small, large = seen["small"][0], seen["large"][0]
    assert small["classes"] == large["classes"] == 3
    grew = large["growth"] - small["growth"]
    assert grew < 8 << 20, f"rank 0 held {grew / 2**20:.1f} MiB more when the other partition grew 100-fold"

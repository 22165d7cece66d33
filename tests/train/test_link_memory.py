"""A rank's memory in link evaluation grows with its own partition, not with the graph (issue 28): two graphs
that differ only in the size of the other partition (a ring of 20 k or 500 k nodes) cost rank 0 the same,
measured as the process's peak resident memory while it sets up the evaluation (reads its blocks of the
held-out edges, builds the original-ID map and its shard of the known edges, ``--filtered``) and while it
evaluates its blocks (negatives drawn over the whole graph, translated, looked up among the known edges).
Whole tables, as ranks once held them (original IDs and their inverse, every partition's known edges in both
directions), made rank 0's set-up 76 MB larger on the larger graph (15.7 -> 91.3 MB); now 6.7 MB on both."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from graphshard import Graph, partition_graph
from graphshard.distributed.ranks.launcher import launch
from graphshard.tasks.link_split import LinkSplit, save_link_split
from tests.memory import needs_peak_reset, peak_rss, restart_peak

OWN, OWN_EDGES, HELD = 20_000, 60_000, 9_000  # partition 0: random edges, HELD of them validation, HELD test
OTHER = {"small": 20_000, "large": 500_000}  # partition 1: a ring; the whole graph on a rank cost 80 MB more


def _graph(other: int, out: Path) -> tuple[str, str]:
    """Partition 0's random edges (the held-out ones taken out) and partition 1's ring, no edge between them:
    the held-out edges file is the same for both sizes."""
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, OWN, OWN_EDGES), rng.integers(0, OWN, OWN_EDGES)
    held = LinkSplit(
        ("_N", "_E", "_N"), np.stack([src[:HELD], dst[:HELD]]), np.stack([src[HELD:], dst[HELD:]])[:, :HELD]
    )
    ring = np.arange(other)
    src = np.concatenate([src[2 * HELD :], OWN + ring])
    dst = np.concatenate([dst[2 * HELD :], OWN + (ring + 1) % other])
    n = OWN + other
    feats = {"feat": np.zeros((n, 2), dtype=np.float32)}
    owner = (np.arange(n) >= OWN).astype(np.int64)
    partition_graph(Graph.from_arrays(src, dst, n, node_feats=feats), "g", 2, out, part_method=owner)
    save_link_split(held, out / "held.safetensors")
    return str(out / "g.json"), str(out / "held.safetensors")


def _worker(config: str, split: str, out: str) -> None:
    import numpy as np
    import torch

    from graphshard.distributed.runtime.original import OriginalIds
    from graphshard.distributed.runtime.session import session
    from graphshard.tasks.inputs import ModelInputs
    from graphshard.tasks.link import LinkEvaluator, link_model
    from graphshard.tasks.link_split import open_link_split
    from graphshard.tasks.loop import open_graph
    from graphshard.tasks.options import TrainOptions

    opts = TrainOptions(
        part_config=config, task="link", link_split=split, filtered=True, hidden=4, eval_negatives=20, progress=False
    )
    with session(timeout=60) as s:
        torch.manual_seed(0)
        g = open_graph(opts)
        held = open_link_split(split)
        et = g.canonical_etype(held.etype)
        inputs = ModelInputs(g, opts)
        model = link_model(opts, inputs, et)
        warm = OriginalIds(g, "_N")  # the first maps, RPCs and exchanges allocate their buffers once
        warm(np.arange(0, g.num_nodes("_N"), 1000))
        warm.free()
        before = restart_peak()
        evaluate = LinkEvaluator(s, g, model, inputs, et=et, opts=opts, held=held)
        setup = peak_rss() - before
        evaluate.outputs.get()  # every node's outputs (layer-wise inference, O(partition); not measured here)
        before = restart_peak()
        figures = evaluate("val", 1) | evaluate("test", 2)
        evaluation = peak_rss() - before
        evaluate.close()
        record = {"setup": setup, "evaluation": evaluation, "blocks": len(evaluate.blocks["val"]), **figures}
        Path(out, f"rank{s.rank}.json").write_text(json.dumps(record))


@needs_peak_reset
def test_link_evaluation_memory_does_not_grow_with_the_other_partition(tmp_path):
    seen = {}
    for name, other in OTHER.items():
        out = tmp_path / name
        launch(_worker, 2, (*_graph(other, out), str(out)), timeout=120)
        seen[name] = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    small, large = seen["small"][0], seen["large"][0]
    assert small["blocks"] == large["blocks"] == 1  # 3 blocks of 4096 held-out edges: rank 0 evaluates one
    for kind in ("setup", "evaluation"):
        grew = large[kind] - small[kind]
        assert grew < 6 << 20, f"rank 0's {kind} took {grew / 2**20:.1f} MiB more when the other partition grew 25-fold"
    assert 0 < large["mrr_filtered"] <= 1 and 0 < small["auc"] <= 1

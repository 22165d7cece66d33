"""Features stored in 16 bits (``feat_dtype``) train as float32 storage does: the runtime serves the rows as
stored and the model upcasts them at its input, so the accuracy stays within noise."""

from __future__ import annotations

import json

from graphshard import partition_graph
from graphshard.datasets import community_graph
from graphshard.train import TrainOptions, train


def test_half_precision_storage_keeps_the_accuracy(tmp_path):
    g = community_graph(num_nodes=3000, noise=8.0, seed=3).graph
    acc = {}
    for dt, code in ((None, "F32"), ("float16", "F16"), ("bfloat16", "BF16")):
        out = tmp_path / (dt or "float32")
        partition_graph(g, "c", 2, out, part_method="metis", feat_dtype=dt)
        cfg = json.loads((out / "c.json").read_text())
        assert cfg["feature_schema"]["node_feats"]["_N/feat"]["dtype"] == code
        got = train(
            TrainOptions(part_config=str(out / "c.json"), fanouts=[5, 5], batch_size=256, epochs=4, progress=False),
            num_procs=2,
        )
        acc[dt] = got["test_acc"]
    for dt in ("float16", "bfloat16"):
        assert abs(acc[None] - acc[dt]) <= 0.02, acc
        assert acc[dt] > 0.7, acc  # learnt: chance is 1/8

"""``graphshard serve`` after a regression and a multi-label run: its predictions are what ``graphshard embed``
writes, read as the label kind says (the values; the labels whose logit is above 0, i.e. probability 0.5)."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from graphshard import partition_graph
from graphshard.cli import main
from graphshard.datasets import community_graph
from graphshard.train import TrainOptions, train
from tests.serve.service import running


@pytest.mark.parametrize("targets", ["regression", "multilabel"])
def test_predictions_follow_the_label_kind(tmp_path, targets):
    g = community_graph(num_nodes=400, num_classes=4, seed=2, targets=targets).graph
    partition_graph(g, "t", 1, tmp_path / "p", part_method="random")
    config, ckpt = str(tmp_path / "p" / "t.json"), str(tmp_path / "ckpt")
    opts = TrainOptions(part_config=config, epochs=2, fanouts=[3, 3], batch_size=64, progress=False, checkpoint=ckpt)
    train(opts, num_procs=1)
    args = ["--part-config", config, "--checkpoint", ckpt]
    assert main(["embed", *args, "--out", str(tmp_path / "e.npy"), "--num-procs", "1"]) == 0
    want = np.load(tmp_path / "e.npy")
    nodes = [3, 0, 399, 3]
    with running([*args, "--num-procs", "1"], tmp_path) as (url, _):
        body = httpx.post(f"{url}/v1/predict", json={"nodes": nodes}, timeout=30).json()
    if targets == "regression":
        assert want.shape == (400, 1)
        np.testing.assert_allclose(body["predictions"], want[nodes, 0], atol=1e-5)
        assert "scores" not in body
    else:
        assert body["predictions"] == [np.flatnonzero(want[n] > 0).tolist() for n in nodes]
        np.testing.assert_allclose(body["probabilities"], 1 / (1 + np.exp(-want[nodes].astype(np.float64))), atol=1e-5)
        np.testing.assert_allclose(body["scores"], want[nodes], atol=1e-5)

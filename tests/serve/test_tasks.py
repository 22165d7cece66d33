"""``graphshard serve`` after a regression, a multi-label and an edge classification run: its predictions are
what ``graphshard embed`` writes, read as the label kind says (the values; the labels whose logit is above 0,
i.e. probability 0.5), and for edges the checkpoint's decoder on both ends' rows."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
import torch

from graphshard import partition_graph
from graphshard.cli import main
from graphshard.datasets import community_graph
from graphshard.models.edge import edge_decoder
from graphshard.tasks.checkpoint import read_weights
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


def test_edge_predictions_are_embed_and_the_decoder(tmp_path):
    """An edge task's /v1/predict: the checkpoint's decoder on ``graphshard embed``'s rows of both ends."""
    g = community_graph(num_nodes=400, num_classes=4, seed=2, edge_targets="classes").graph
    partition_graph(g, "t", 1, tmp_path / "p", part_method="random")
    config, ckpt = str(tmp_path / "p" / "t.json"), str(tmp_path / "ckpt")
    opts = TrainOptions(
        part_config=config, task="edge", epochs=2, fanouts=[3, 3], batch_size=256, progress=False, checkpoint=ckpt
    )
    train(opts, num_procs=1)
    args = ["--part-config", config, "--checkpoint", ckpt]
    assert main(["embed", *args, "--out", str(tmp_path / "e.npy"), "--num-procs", "1"]) == 0
    h = torch.from_numpy(np.load(tmp_path / "e.npy"))
    weights = read_weights(f"{ckpt}/rank0")
    assert weights is not None
    decoder = edge_decoder("concat", 64, 0, 64, out_dim=3)
    decoder.load_state_dict({k[len("decoder.") :]: v for k, v in weights[1].items() if k.startswith("decoder.")})
    edges = [[3, 7], [0, 399], [7, 3]]
    with torch.no_grad():
        want = decoder(h[[e[0] for e in edges]], h[[e[1] for e in edges]]).numpy()
    with running([*args, "--num-procs", "1"], tmp_path) as (url, _):
        body = httpx.post(f"{url}/v1/predict", json={"edges": edges, "type": "_N:_E:_N"}, timeout=30).json()
        wrong = httpx.post(f"{url}/v1/predict", json={"edges": edges, "type": "a:b:c"}, timeout=30)
        nodes = httpx.post(f"{url}/v1/predict", json={"nodes": [1]}, timeout=30)
    assert body["edges"] == edges and body["type"] == "_N:_E:_N"
    assert body["predictions"] == want.argmax(1).tolist()
    np.testing.assert_allclose(body["scores"], want, atol=1e-5)
    assert wrong.status_code == 422 and wrong.json()["field"] == "type"
    assert nodes.status_code == 422 and "predicts 'edges' only" in nodes.json()["error"]

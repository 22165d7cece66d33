"""``graphshard serve`` for the other kinds of checkpoint: link prediction (embeddings and pair scores) and a
heterogeneous graph (the target type's predictions), each checked against the outputs the training run saved
of its best epoch (``--save-embeddings``: what ``graphshard embed`` writes of ``ckpt/best``)."""

from __future__ import annotations

from dataclasses import replace

import httpx
import numpy as np
import pytest

from graphshard.cli import main
from graphshard.datasets import community_graph, hetero_graph, save_dataset
from graphshard.errors import InputError
from graphshard.serve import ServeOptions, serve
from graphshard.train import TrainOptions, train
from tests.serve.service import running


def _trained(tmp, ds, task: str, model: str = "sage") -> tuple[str, str]:
    """Train 1 epoch on 2 ranks from a dataset directory, saving every node's output to ``tmp/e(.npy)``; the
    partition config and the best epoch's checkpoint."""
    save_dataset(ds, tmp / "data")
    ckpt, saved = str(tmp / "ckpt"), str(tmp / ("e.npy" if task == "link" else "e"))
    opts = TrainOptions(
        task=task,
        model=model,
        checkpoint=ckpt,
        save_embeddings=saved,
        fanouts=[3, 3],
        batch_size=128,
        hidden=8,
        epochs=1,
    )
    train(replace(opts, progress=False), num_procs=2, dataset=str(tmp / "data"), work_dir=str(tmp / "w"))
    (config,) = [p for p in (tmp / "w").rglob("*.json") if p.parent.name == task and not p.name.startswith(".")]
    return str(config), f"{ckpt}/best"


def test_a_link_model_serves_embeddings_and_scores_pairs(tmp_path):
    """A GCN encoder: it normalises by in-degrees, which a node's own neighbourhood shows only with one hop
    more; one node at a time, the answers still equal embed's (layer-wise, whole-graph degrees)."""
    ds = community_graph(num_nodes=300, avg_degree=6, feat_dim=8, seed=0)
    config, ckpt = _trained(tmp_path, ds, "link", model="gcn")
    args = ["--part-config", config, "--checkpoint", ckpt]
    want = np.load(tmp_path / "e.npy")
    with running([*args, "--num-procs", "2", "--embeddings", str(tmp_path / "e.npy")], tmp_path) as (url, _):
        r = httpx.post(f"{url}/v1/embed", json={"nodes": list(range(300))}, timeout=30)
        np.testing.assert_allclose(np.array(r.json()["embeddings"]), want, atol=1e-5)
        with httpx.Client(timeout=30) as client:
            alone = [
                client.post(f"{url}/v1/embed", json={"nodes": [i]}).json()["embeddings"][0] for i in range(0, 300, 7)
            ]
        np.testing.assert_allclose(np.array(alone), want[::7], atol=1e-5)
        pairs = [[1, 2], [3, 299], [7, 7]]
        for stale in (False, True):
            r = httpx.post(f"{url}/v1/predict", json={"pairs": pairs, "stale": stale}, timeout=30)
            assert r.status_code == 200, r.text
            u, v = np.array(pairs).T
            dot = (want[u] * want[v]).sum(axis=1)  # the dot decoder on embed's rows
            np.testing.assert_allclose(r.json()["scores"], dot, atol=1e-5)
            np.testing.assert_allclose(r.json()["probabilities"], 1 / (1 + np.exp(-dot)), atol=1e-5)
        for body, field in [
            ({"nodes": [1]}, "nodes"),
            ({"pairs": [[1, 2], [3]]}, "pairs[1]"),
            ({"pairs": [[1, 2], [3, "x"]]}, "pairs[1][1]"),
            ({"pairs": [[1, 300]]}, "pairs[0][1]"),
        ]:
            r = httpx.post(f"{url}/v1/predict", json=body, timeout=30)
            assert 400 <= r.status_code < 500 and r.json()["field"] == field, r.text
    # the hidden layer the last layer reads, as embed writes it
    hidden = str(tmp_path / "h.npy")
    assert main(["embed", *args, "--embedding-layer", "hidden", "--out", hidden, "--num-procs", "2"]) == 0
    want_h = np.load(hidden)
    served = [*args, "--num-procs", "2", "--embedding-layer", "hidden", "--embeddings", hidden]
    with running(served, tmp_path) as (url, _), httpx.Client(timeout=30) as client:
        r = client.post(f"{url}/v1/embed", json={"nodes": list(range(300))})
        np.testing.assert_allclose(np.array(r.json()["embeddings"]), want_h, atol=1e-5)
        alone = [client.post(f"{url}/v1/embed", json={"nodes": [i]}).json()["embeddings"][0] for i in (0, 150, 299)]
        np.testing.assert_allclose(np.array(alone), want_h[[0, 150, 299]], atol=1e-5)
        stale = client.post(f"{url}/v1/embed", json={"nodes": [4], "stale": True}).json()["embeddings"]
        np.testing.assert_array_equal(np.array(stale, dtype=np.float32), want_h[[4]])
        r = client.post(f"{url}/v1/predict", json={"pairs": [[1, 2]]})  # pairs: the output layer still
        np.testing.assert_allclose(r.json()["scores"], [(want[1] * want[2]).sum()], atol=1e-5)
        r = client.post(f"{url}/v1/predict", json={"pairs": [[1, 2]], "stale": True})
        assert (r.status_code, r.json()["field"]) == (422, "stale"), r.text


def test_a_heterogeneous_model_answers_for_its_target_type(tmp_path):
    ds = hetero_graph(num_papers=400, num_authors=150, num_institutions=10, num_fields=8, seed=1)
    config, ckpt = _trained(tmp_path, ds, "node")
    args = ["--part-config", config, "--checkpoint", ckpt]
    want = np.load(tmp_path / "e" / "paper.npy")
    with pytest.raises(InputError, match="--embedding-layer hidden: model 'sage' \\(heterogeneous"):
        serve(config, ckpt, ServeOptions(embedding_layer="hidden", port=0), num_procs=2)
    with running([*args, "--num-procs", "2"], tmp_path) as (url, _):
        nodes = np.random.default_rng(0).permutation(400).tolist()
        r = httpx.post(f"{url}/v1/predict", json={"nodes": nodes, "type": "paper"}, timeout=30)
        np.testing.assert_allclose(np.array(r.json()["scores"]), want[nodes], atol=1e-5)
        r = httpx.post(f"{url}/v1/predict", json={"nodes": [0], "type": "author"}, timeout=30)
        assert (r.status_code, r.json()["field"]) == (422, "type")
        # a new paper with the features and in-edges of existing ones (and no out-edges, so nothing it reads
        # changes) is answered as they are: what embed wrote for them
        copies = [7, 123, 398]
        g, new = ds.graph, []
        for p in copies:  # its in-edges: the relations into papers, and the reverses training adds (rev_<name>)
            edges = {
                f"{s},{r},{d}": src[dst == p].tolist() for (s, r, d), (src, dst) in g.edges.items() if d == "paper"
            }
            for (s, r, d), (src, dst) in g.edges.items():
                if s == "paper" and d != "paper":
                    edges[f"{d},rev_{r},paper"] = dst[src == p].tolist()
            new.append({"features": {"feat": g.node_feats["paper"]["feat"][p].tolist()}, "edges": edges})
        r = httpx.post(f"{url}/v1/predict", json={"new": new, "type": "paper"}, timeout=30)
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(np.array(r.json()["scores"]), want[copies], atol=1e-5)
        one = {"features": {"feat": [1.0] * 32}, "edges": [1]}  # a bare list: which of the 3 edge types into papers?
        r = httpx.post(f"{url}/v1/predict", json={"new": one, "type": "paper"}, timeout=30)
        assert r.status_code == 422 and "3 edge types end at node type 'paper'" in r.json()["error"], r.text
        one["edges"] = {"cites": [1], "writes": [149]}
        assert httpx.post(f"{url}/v1/predict", json={"new": one, "type": "paper"}, timeout=30).status_code == 200
        one["edges"] = {"writes": [150]}  # authors are 0..149
        r = httpx.post(f"{url}/v1/predict", json={"new": one, "type": "paper"}, timeout=30)
        assert (r.status_code, r.json()["field"]) == (404, "new[0].edges.writes[0]"), r.text

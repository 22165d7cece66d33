"""``graphshard serve`` as users run it: 2 ranks on a small graph, queried over HTTP by a real client.
Answers are checked against ``graphshard embed`` (layer-wise, exact) and, for new nodes, against PyG's
layers on the whole graph with the node added; bad requests get 4xx naming the field and the service goes
on; a frozen rank makes ``/healthz`` answer 503 naming it, while its partition, whose files rank 0 reads itself
(co-located), is still served. (Across hosts, a request that needs a lost rank's partition answers 503 naming it:
``tests/cluster/test_serve.py``.)"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
import torch

from graphshard import partition_graph
from graphshard.cli import main
from graphshard.train import TrainOptions, train
from tests.graphs import small_homo
from tests.serve.service import running

HIDDEN = 12
HEARTBEAT = 3.0


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A trained checkpoint, embed's output of it, and the service on 2 ranks: ``(url, graph, dir, proc)``."""
    tmp = tmp_path_factory.mktemp("serve")
    g = small_homo()
    partition_graph(g, "s", 2, tmp / "p", part_method="metis")
    config, ckpt = str(tmp / "p" / "s.json"), str(tmp / "ckpt")
    train(
        TrainOptions(
            part_config=config, epochs=2, fanouts=[3, 3], batch_size=64, hidden=HIDDEN, progress=False, checkpoint=ckpt
        ),
        num_procs=2,
    )
    args = ["--part-config", config, "--checkpoint", ckpt]
    assert main(["embed", *args, "--out", str(tmp / "e.npy"), "--num-procs", "2"]) == 0
    limits = ["--max-nodes", "300", "--max-body-mb", "1", "--heartbeat-timeout", str(HEARTBEAT)]
    with running([*args, "--num-procs", "2", "--embeddings", str(tmp / "e.npy"), *limits], tmp) as (url, proc):
        yield url, g, tmp, proc


def _post(url: str, path: str, body, **kw) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, timeout=30, **kw)


def test_answers_are_what_embed_writes(served):
    url, _, tmp, _ = served
    want = np.load(tmp / "e.npy")
    nodes = [int(i) for i in np.random.default_rng(0).permutation(240)] + [5, 5, 0]  # every node, repeats too
    r = _post(url, "/v1/predict", {"nodes": nodes})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["nodes"] == nodes and body["type"] == "_N" and body["stale"] is False
    np.testing.assert_allclose(np.array(body["scores"]), want[nodes], atol=1e-5)
    assert body["predictions"] == want[nodes].argmax(axis=1).tolist()
    r = _post(url, "/v1/embed", {"nodes": [7, 3]})
    np.testing.assert_allclose(np.array(r.json()["embeddings"]), want[[7, 3]], atol=1e-5)
    stale = _post(url, "/v1/embed", {"nodes": [7, 3], "stale": True}).json()
    assert stale["stale"] is True
    np.testing.assert_array_equal(np.array(stale["embeddings"], dtype=np.float32), want[[7, 3]])


def _whole_graph_outputs(tmp, g, feat: np.ndarray, ins: list[int], outs: list[int]) -> np.ndarray:
    """The model's output for a node added to the whole graph (last row), with PyG's SAGEConv layers."""
    from graphshard.models import GraphSAGE
    from graphshard.tasks.checkpoint import read_weights

    _, weights, _ = read_weights(tmp / "ckpt" / "rank0")
    x = torch.from_numpy(np.vstack([g.node_feats["_N"]["feat"], feat[None]])).float()
    src, dst = g.edges[("_N", "_E", "_N")]
    new = 240
    src = np.concatenate([src, ins, np.full(len(outs), new)])
    dst = np.concatenate([dst, np.full(len(ins), new), outs])
    model = GraphSAGE(x.shape[1], HIDDEN, 4, 2, dropout=0.5)
    model.load_state_dict(weights)
    edge_index = torch.from_numpy(np.stack([src, dst])).long()
    with torch.no_grad():
        h = torch.relu(model.convs[0](x, edge_index))
        return model.convs[1](h, edge_index)[new].numpy()


def test_new_nodes_are_what_pyg_gives_on_the_graph_with_them_added(served):
    url, g, tmp, _ = served
    rng = np.random.default_rng(1)
    nodes = [
        (rng.normal(size=4).astype(np.float32), [3, 17, 200], []),  # receives only
        (rng.normal(size=4).astype(np.float32), [5, 6], [5, 6, 100]),  # sends too: its own subgraph
        (rng.normal(size=4).astype(np.float32), [], []),  # no edges: its own row only
    ]
    body = {"new": [{"features": {"feat": f.tolist()}, "edges": i, "out_edges": o} for f, i, o in nodes]}
    r = _post(url, "/v1/predict", body)
    assert r.status_code == 200, r.text
    got = np.array(r.json()["scores"])
    assert r.json()["nodes"] == [None, None, None]
    for k, (f, i, o) in enumerate(nodes):
        np.testing.assert_allclose(got[k], _whole_graph_outputs(tmp, g, f, i, o), atol=1e-5)


@pytest.mark.parametrize(
    "body, status, field",
    [
        ([1, 2], 400, None),
        ({"nodes": [1, "x"]}, 422, "nodes[1]"),
        ({"nodes": [1, 240]}, 404, "nodes[1]"),
        ({"nodes": [-1]}, 404, "nodes[0]"),
        ({"nodes": [1.5]}, 422, "nodes[0]"),
        ({"nodes": list(range(301))}, 413, "nodes"),
        ({"nodes": [1], "type": "paper"}, 422, "type"),
        ({"nodes": [1], "colour": 1}, 422, "colour"),
        ({}, 422, "nodes"),
        ({"new": {"features": {"feat": [1, 2]}, "edges": [1]}}, 422, "new[0].features.feat"),
        ({"new": {"features": {"feat": [1, 2, 3, None]}}}, 422, "new[0].features.feat[3]"),
        ({"new": {"features": {"feat": [1, 2, 3, 4]}, "edges": [999]}}, 404, "new[0].edges[0]"),
        ({"new": {"features": {}}}, 422, "new[0].features"),
        ({"new": [{"features": {"feat": [1, 2, 3, 4]}}], "stale": True}, 422, "stale"),
    ],
)
def test_bad_requests_get_a_4xx_naming_the_field(served, body, status, field):
    r = _post(served[0], "/v1/predict", body)
    assert (r.status_code, r.json()["field"]) == (status, field), r.text
    assert r.json()["error"]


def test_what_is_no_json_or_too_big_is_refused_and_the_service_goes_on(served):
    url = served[0]
    r = httpx.post(f"{url}/v1/predict", content=b'{"nodes": [1,', timeout=30)
    assert r.status_code == 400 and "not JSON" in r.json()["error"]
    r = httpx.post(f"{url}/v1/predict", content=b"\xff\xfe", timeout=30)
    assert r.status_code == 400
    r = httpx.post(f"{url}/v1/embed", content=b"[" * 100_000 + b"]" * 100_000, timeout=30)  # nested too deep
    assert r.status_code == 400
    r = httpx.post(f"{url}/v1/predict", content=b" " * (2 << 20), timeout=30)
    assert r.status_code == 413
    assert httpx.get(f"{url}/v1/predict", timeout=30).status_code == 405
    assert httpx.get(f"{url}/nothing", timeout=30).status_code == 404
    r = httpx.get(f"{url}/healthz", timeout=30)
    assert r.status_code == 200 and [x["partition"] for x in r.json()["ranks"]] == [0, 1]
    assert not list(served[2].glob("**/*.tmp*"))  # nothing was written


def test_a_short_load_is_batched_and_answered_right(served):
    url, _, tmp, _ = served
    want = np.load(tmp / "e.npy")
    ids = np.random.default_rng(2).integers(0, 240, 400).tolist()
    with httpx.Client(timeout=30, limits=httpx.Limits(max_connections=16)) as client:

        def ask(i: int) -> tuple[int, list]:
            r = client.post(f"{url}/v1/predict", json={"nodes": [i]})
            return r.status_code, r.json()["scores"]

        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(ask, ids))
    assert all(status == 200 for status, _ in answers)
    np.testing.assert_allclose(np.array([s[0] for _, s in answers]), want[ids], atol=1e-5)
    metrics = _metrics(url)
    assert metrics['graphshard_requests_total{endpoint="/v1/predict",status="200"}'] >= 400
    # micro-batching: some model batches held more than one request
    assert metrics['graphshard_batch_requests_bucket{le="1.0"}'] < metrics["graphshard_batch_requests_count"]
    assert metrics["graphshard_remote_rows_total"] > 0


def _metrics(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return {k: float(v) for k, v in (line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))}


def test_a_frozen_rank_is_named_and_its_co_located_partition_still_served(served):
    """Last in the module: the service is left with a lost rank."""
    url, _, tmp, _ = served
    pid = httpx.get(f"{url}/healthz", timeout=30).json()["ranks"][1]["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        while (r := httpx.get(f"{url}/healthz", timeout=30)).status_code == 200:
            assert time.monotonic() - start < HEARTBEAT + 4, "the frozen rank was not found lost"
        assert r.status_code == 503
        (lost,) = r.json()["lost"]
        assert (lost["rank"], lost["partition"]) == (1, 1) and "no heartbeat" in lost["why"]
        asked = time.monotonic()
        r = _post(url, "/v1/predict", {"nodes": list(range(240))})  # half of them are partition 1's
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(np.array(r.json()["scores"]), np.load(tmp / "e.npy"), atol=1e-5)
        assert time.monotonic() - asked < 2.0
        r = _post(url, "/v1/predict", {"nodes": [1, 2], "stale": True})  # needs no rank: still answered
        assert r.status_code == 200
        assert _metrics(url)["graphshard_lost_ranks"] == 1
    finally:
        os.kill(pid, signal.SIGCONT)

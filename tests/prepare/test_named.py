"""The users' IDs end to end: a generated graph written as tables with string IDs, prepared, trained (with a
checkpoint), then ``embed --id-map`` (every row beside its user's ID) and ``serve --id-map`` (nodes asked and
answered by the users' IDs): the service's exact embedding of a user equals embed's row of that user."""

from __future__ import annotations

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphshard.cli import main
from graphshard.datasets import community_graph
from graphshard.prepare import prepare
from graphshard.train import TrainOptions, train
from tests.serve.service import running

from .tables import id_map, write_config

pytest.importorskip("duckdb")
pytest.importorskip("starlette")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("named")
    g = community_graph(num_nodes=600, seed=4).graph
    rng = np.random.default_rng(4)
    names = np.array([f"acct-{v}" for v in rng.permutation(10**6)[:600]])
    feats, label = g.node_feats["_N"]["feat"], g.node_feats["_N"]["label"]
    pq.write_table(
        pa.table(
            {
                "account": names,
                "x": pa.FixedSizeListArray.from_arrays(pa.array(feats.astype(np.float32).ravel()), feats.shape[1]),
                "group": label,
            }
        ),
        root / "accounts.parquet",
    )
    src, dst = next(iter(g.edges.values()))
    pq.write_table(pa.table({"a": names[src], "b": names[dst]}), root / "transfers.parquet")
    config = {
        "graph_name": "bank",
        "nodes": [
            {
                "type": "account",
                "path": "accounts.parquet",
                "id": "account",
                "features": [{"column": "x", "transform": "none"}],
                "label": {"column": "group", "kind": "classification"},
            }
        ],
        "edges": [
            {"type": ["account", "pays", "account"], "path": "transfers.parquet", "source": "a", "destination": "b"}
        ],
    }
    prepare(write_config(root, config), root / "prepared")
    m = train(
        TrainOptions(fanouts=[5, 5], batch_size=128, epochs=2, progress=False, checkpoint=str(root / "ckpt")),
        num_procs=1,
        dataset=str(root / "prepared"),
        work_dir=str(root / "work"),
    )
    return root, m["part_config"]


@pytest.fixture(scope="module")
def embedded(trained):
    root, part_config = trained
    out = root / "emb.npy"
    args = ["embed", "--part-config", part_config, "--checkpoint", str(root / "ckpt"), "--out", str(out)]
    assert main([*args, "--num-procs", "1", "--id-map", str(root / "prepared")]) == 0
    return np.load(out, allow_pickle=False)


def test_embed_writes_rows_with_the_users_ids(trained, embedded):
    root, rows = trained[0], embedded
    named = pq.read_table(root / "emb.parquet")
    np.testing.assert_array_equal(
        named.column("id").to_numpy(zero_copy_only=False), id_map(root / "prepared", "account")
    )
    np.testing.assert_array_equal(np.asarray(named.column("embedding").to_pylist(), np.float32), rows)


def test_serve_answers_in_the_users_ids(trained, embedded):
    root, part_config = trained
    ids = id_map(root / "prepared", "account")
    asked = [ids[17], ids[3], ids[420]]
    args = ["--part-config", part_config, "--checkpoint", str(root / "ckpt"), "--id-map", str(root / "prepared")]
    with running([*args, "--num-procs", "1"], root) as (url, _):
        r = httpx.post(f"{url}/v1/embed", json={"nodes": asked}, timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["nodes"] == asked
        np.testing.assert_allclose(r.json()["embeddings"], embedded[[17, 3, 420]], rtol=1e-4, atol=1e-5)
        r = httpx.post(f"{url}/v1/predict", json={"nodes": ["acct-nobody"]}, timeout=60)
        assert r.status_code == 404 and r.json()["field"] == "nodes[0]"

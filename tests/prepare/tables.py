"""Small users' tables, written as Parquet and CSV, with the config that prepares them; and readers of a
prepared graph in the users' own IDs (through its ID maps), for comparing results with the tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import yaml

from graphshard.chunked.load import load_chunked_graph
from graphshard.chunked.spec import read_metadata


def write_tables(root: Path, seed: int = 0, users: int = 300, items: int = 60, buys: int = 1500) -> dict:
    """user (string IDs, two Parquet files), item (integer IDs, Parquet, vectors), buys (CSV) tables."""
    rng = np.random.default_rng(seed)
    (root / "users").mkdir(parents=True, exist_ok=True)
    uid = np.array([f"u{i:05d}" for i in rng.permutation(users)])
    age = rng.normal(40, 10, users)
    age[::17] = np.nan
    score = rng.integers(0, 100, users).astype(float)
    score[5::23] = np.nan
    country = rng.choice(np.array(["fr", "de", "us", "jp"], dtype=object), users)
    country[::29] = None
    tags = np.array(["a|b", "c", "b|d|a", ""], dtype=object)[rng.integers(0, 4, users)]
    churned = rng.choice(np.array(["no", "yes", "maybe"]), users)
    users_t = pa.table(
        {
            "user_id": uid,
            "age": age,
            "score": score,
            "country": country,
            "tags": tags,
            "churned": churned,
            "joined": rng.integers(0, 10_000, users),
        }
    )
    pq.write_table(users_t.slice(0, users // 2), root / "users" / "part-0.parquet")
    pq.write_table(users_t.slice(users // 2), root / "users" / "part-1.parquet")
    iid = rng.permutation(items) * 10 + 7
    emb = rng.normal(size=(items, 4))
    genres = [list(rng.choice(["x", "y", "z"], rng.integers(0, 3), replace=False)) for _ in range(items)]
    items_t = pa.table({"item_id": iid, "embedding": [list(r) for r in emb], "genres": genres})
    pq.write_table(items_t, root / "items.parquet")
    src = rng.choice(uid, buys)
    dst = rng.choice(iid, buys)
    buys_t = pa.table(
        {"user_id": src, "item_id": dst, "amount": rng.exponential(3, buys), "rating": rng.integers(1, 6, buys)}
    )
    pacsv.write_csv(buys_t, root / "buys.csv")
    return {"users": users_t, "items": items_t, "buys": buys_t}


CONFIG = {
    "graph_name": "shop",
    "nodes": [
        {
            "type": "user",
            "path": "users/*.parquet",
            "id": "user_id",
            "features": [
                {"column": "age", "transform": "standard"},
                {"column": "score", "transform": "min_max", "imputer": "median"},
                {"column": "age", "transform": "rank_gauss"},
                {"column": "score", "transform": "bucket", "buckets": [25, 50, 75]},
                {"column": "country", "transform": "categorical"},
                {"column": "tags", "transform": "multi_categorical", "separator": "|"},
                {"column": "country", "transform": "categorical", "output": "index"},
            ],
            "label": {"column": "churned", "kind": "classification", "split": [0.6, 0.2, 0.2]},
        },
        {
            "type": "item",
            "path": "items.parquet",
            "id": "item_id",
            "features": [
                {"column": "embedding", "transform": "none"},
                {"column": "genres", "transform": "multi_categorical", "name": "genre"},
            ],
        },
    ],
    "edges": [
        {
            "type": ["user", "buys", "item"],
            "path": "buys.csv",
            "source": "user_id",
            "destination": "item_id",
            "features": [
                {"column": "amount", "transform": "rank_gauss"},
                {"column": "amount", "transform": "standard"},
            ],
            "label": {"column": "rating", "kind": "classification"},
            "reverse": True,
        }
    ],
}


def write_config(root: Path, config: dict | None = None, name: str = "prepare.yaml") -> Path:
    path = root / name
    path.write_text(yaml.safe_dump(config or CONFIG) if name.endswith(".yaml") else json.dumps(config or CONFIG))
    return path


def id_map(out: Path, ntype: str) -> np.ndarray:
    """The users' IDs of a node type in graphshard's ID order."""
    files = sorted((out / "id_maps" / ntype).glob("*.parquet"))
    table = pa.concat_tables([pq.read_table(p) for p in files])
    nid = table.column("__gs_nid").to_numpy()
    assert (nid == np.arange(nid.size)).all()
    return table.column("id").to_numpy(zero_copy_only=False)


def load(out: Path):
    """The prepared graph (every array), as the chunked reader reads it."""
    return load_chunked_graph(read_metadata(out))


def rows_in_id_order(table: pa.Table, id_column: str, ids: np.ndarray) -> pa.Table:
    """``table``'s rows ordered as ``ids`` (the ID map) lists their IDs."""
    position = {v: i for i, v in enumerate(table.column(id_column).to_pylist())}
    return table.take(pa.array([position[v] for v in ids.tolist()]))


def _edges(out: Path, et) -> np.ndarray:
    """Every edge of ``et`` with its data, one row each, sorted: the same whatever order they were written in."""
    g = load(out)
    src, dst = g.edges[et]
    cols = [src[:, None], dst[:, None]] + [
        np.asarray(v, np.float64).reshape(src.size, -1) for _, v in sorted(g.edge_feats.get(et, {}).items())
    ]
    rows = np.nan_to_num(np.hstack(cols), nan=-9.0)
    return rows[np.lexsort(rows.T[::-1])]


def _close(a, b, path: str = "") -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12), path
    else:
        assert a == b, path


def assert_same_graph(one: Path, other: Path) -> None:
    """Two prepared outputs hold the same graph: ID maps, node rows, edges with their data, fitted transforms."""
    g1, g2 = load(one), load(other)
    assert g1.num_nodes == g2.num_nodes
    for t in g1.num_nodes:
        np.testing.assert_array_equal(id_map(one, t), id_map(other, t))
    for t, data in g1.node_feats.items():
        assert data.keys() == g2.node_feats[t].keys()
        for k, v in data.items():
            assert v.dtype == g2.node_feats[t][k].dtype, (t, k)
            np.testing.assert_allclose(v, g2.node_feats[t][k], rtol=1e-6, atol=1e-6, err_msg=f"{t}/{k}")
    assert g1.canonical_etypes == g2.canonical_etypes
    for et in g1.canonical_etypes:
        np.testing.assert_allclose(_edges(one, et), _edges(other, et), rtol=1e-6, atol=1e-6, err_msg=str(et))
    fitted = [json.loads((p / "transforms.json").read_text()) for p in (one, other)]
    fitted[0].pop("engine"), fitted[1].pop("engine")
    _close(fitted[0], fitted[1])

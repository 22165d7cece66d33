"""Small users' tables, written as Parquet and CSV, with the config that prepares them; and readers of a
prepared graph in the users' own IDs (through its ID maps), for comparing results with the tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
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
    files = sorted(
        (out / "id_maps" / ntype).glob("*.parquet"), key=lambda p: int("".join(filter(str.isdigit, p.stem)) or 0)
    )
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

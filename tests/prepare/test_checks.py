"""Bad configs and bad tables are named, in one line, before anything is written; --on-dangling drop counts
what it leaves out; the command line says what to install when an engine is missing."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from scipy.special import ndtri

from graphshard.errors import GraphshardError, InputError
from graphshard.prepare import prepare, read_prepare_config

from .tables import CONFIG, load, write_config, write_tables

pytest.importorskip("duckdb")


@pytest.fixture
def root(tmp_path):
    write_tables(tmp_path)
    return tmp_path


def _config(**change):
    cfg = copy.deepcopy(CONFIG)
    for key, value in change.items():
        where, _, field = key.partition("__")
        target = cfg["nodes"][0] if where == "user" else cfg["edges"][0]
        target[field] = value
    return cfg


def _refused(root, cfg, match, **kw):
    with pytest.raises(InputError, match=match) as err:
        prepare(write_config(root, cfg), root / "out", **kw)
    assert "\n" not in str(err.value)
    assert not (root / "out").exists()  # nothing written, not even the directory
    return str(err.value)


@pytest.mark.parametrize(
    "change, match",
    [
        (
            {"user__features": [{"column": "age", "transform": "standrad"}]},
            r"features\[0\]\.transform: 'standrad'.*did you mean 'standard'",
        ),
        ({"user__idd": "x"}, r"nodes\[0\]\.idd: unknown key \(did you mean 'id'\?\)"),
        ({"user__path": "nowhere/*.parquet"}, r"nodes\[0\]\.path: .*nowhere/\*\.parquet matches no file"),
        (
            {"user__features": [{"column": "age", "transform": "bucket", "buckets": [3, 1]}]},
            r"buckets: must be a non-empty ascending",
        ),
        (
            {"user__label": {"column": "churned", "kind": "classification", "split": [0.9, 0.2, 0.1]}},
            r"label\.split: must be three fractions",
        ),
        ({"edges__type": ["user", "buys"]}, r"edges\[0\]\.type: must be \[source type, relation, destination type\]"),
        (
            {"user__features": [{"column": "age", "transform": "standard", "name": "label"}]},
            r"name: 'label' is the name of the label",
        ),
    ],
)
def test_config_mistakes_name_the_key(root, change, match):
    path = write_config(root, _config(**change))
    with pytest.raises(InputError, match=match):
        read_prepare_config(path)


@pytest.mark.parametrize(
    "change, match",
    [
        (
            {"user__features": [{"column": "agee", "transform": "standard"}]},
            r"users/ \(2 files\) \(nodes\[0\]\): no column 'agee'",
        ),
        (
            {"user__features": [{"column": "country", "transform": "standard"}]},
            r"column 'country': transform 'standard' needs numbers",
        ),
        (
            {"user__features": [{"column": "tags", "transform": "multi_categorical"}]},
            r"column 'tags'.* needs 'separator'",
        ),
        (
            {"user__features": [{"column": "age", "transform": "standard", "imputer": "none"}]},
            r"column 'age': 18 values are missing \(rows 'u",
        ),
        (
            {"edges__source": "amount"},
            r"buys.csv \(edges\[0\]\), column 'amount': IDs of 'user' nodes must hold integers or strings",
        ),
        (
            {"edges__source": "rating"},
            r"column 'rating': holds int IDs of 'user' nodes, but their node table's IDs are strings",
        ),
    ],
)
def test_table_mistakes_name_table_and_column(root, change, match):
    _refused(root, _config(**change), match)


def test_duplicate_ids_and_missing_labels(root):
    users = pq.read_table(root / "users" / "part-0.parquet")
    pq.write_table(users.slice(0, 3), root / "users" / "part-2.parquet")  # three users twice
    first = users.column("user_id")[0].as_py()
    _refused(root, CONFIG, rf"column 'user_id': 3 node IDs appear more than once \(e.g. .*'{first}'")
    (root / "users" / "part-2.parquet").unlink()
    churned = users.column("churned").to_pylist()
    churned[4] = None
    pq.write_table(users.set_column(5, "churned", pa.array(churned)), root / "users" / "part-0.parquet")
    _refused(root, CONFIG, r"column 'churned': 1 rows have no label \(null or NaN; rows '.*'\).*allow_missing")
    cfg = _config(user__label={"column": "churned", "kind": "classification", "allow_missing": True})
    prepare(write_config(root, cfg), root / "out")
    data = load(root / "out").node_feats["user"]
    assert (data["label"] == -1).sum() == 1
    unlabelled = data["label"] == -1
    assert not (data["train_mask"] | data["val_mask"] | data["test_mask"])[unlabelled].any()


def test_dangling_edges_error_or_dropped(root, caplog):
    buys = pacsv.read_csv(root / "buys.csv")
    extra = pa.table({"user_id": ["ghost", "u00001"], "item_id": [7, 123456], "amount": [1.0, 2.0], "rating": [1, 2]})
    pacsv.write_csv(pa.concat_tables([buys, extra.cast(buys.schema)]), root / "buys.csv")
    message = _refused(root, CONFIG, r"2 edges name a node their node tables lack")
    assert "'ghost' -> 7" in message and "--on-dangling drop" in message
    done = prepare(write_config(root), root / "out", on_dangling="drop")
    assert done.dropped[("user", "buys", "item")] == 2
    assert done.num_edges[("user", "buys", "item")] == buys.num_rows
    assert "dropped 2 edges" in caplog.text


def test_edge_only_node_type_and_integer_csv_ids(tmp_path):
    rng = np.random.default_rng(1)
    src, dst = rng.integers(0, 50, 400) * 3, rng.integers(0, 20, 400) + 1000
    pacsv.write_csv(pa.table({"a": src, "b": dst}), tmp_path / "links.csv")
    cfg = {"edges": [{"type": ["p", "to", "q"], "path": "links.csv", "source": "a", "destination": "b"}]}
    done = prepare(write_config(tmp_path, cfg, "links.json"), tmp_path / "out")
    assert done.num_nodes == {"p": np.unique(src).size, "q": np.unique(dst).size}
    s, d = load(tmp_path / "out").edges[("p", "to", "q")]
    pairs = sorted(zip(np.unique(src)[s].tolist(), np.unique(dst)[d].tolist()))
    assert pairs == sorted(zip(src.tolist(), dst.tolist()))


def test_rerun_replaces_and_an_interrupted_run_leaves_nothing_complete(root, monkeypatch):
    from graphshard.prepare import edges

    def boom(*a, **k):
        raise GraphshardError("disk gone")

    monkeypatch.setattr(edges.EdgeWriter, "_masks", boom)
    with pytest.raises(GraphshardError):
        prepare(write_config(root), root / "out")
    assert not (root / "out").exists()  # the directory the failed run made is gone with what it held
    monkeypatch.undo()
    first = prepare(write_config(root), root / "out")
    again = prepare(write_config(root), root / "out")  # the same graph again: replaced whole
    assert first.num_edges == again.num_edges and (root / "out" / "metadata.json").is_file()


def test_command_line_and_missing_engine(root):
    run = subprocess.run(
        [sys.executable, "-m", "graphshard.cli", "prepare", str(write_config(root)), "--out", str(root / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "prepared 300 user, 60 item nodes; 1,500 user:buys:item, 1,500 item:rev_buys:user edges" in run.stdout
    assert run.stderr == ""
    code = "import sys; sys.modules['duckdb'] = None; from graphshard.cli import main; sys.exit(main(sys.argv[1:]))"
    run = subprocess.run(
        [sys.executable, "-c", code, "prepare", str(write_config(root)), "--out", str(root / "o2")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    assert (
        run.stderr.strip().splitlines()[-1].endswith("the local engine needs duckdb: pip install 'graphshard[prepare]'")
    )


def test_nan_seen_whatever_the_parquet_statistics_say(tmp_path):
    # pyarrow writes min/max statistics without the NaNs: an engine trusting them would find none
    x = np.arange(1000, dtype=float)
    x[[3, 500]] = np.nan
    pq.write_table(pa.table({"id": np.arange(1000), "x": x}), tmp_path / "n.parquet")
    pq.write_table(pa.table({"s": [1, 2], "d": [2, 3]}), tmp_path / "e.parquet")
    cfg = {
        "nodes": [
            {"type": "n", "path": "n.parquet", "id": "id", "features": [{"column": "x", "transform": "standard"}]}
        ],
        "edges": [{"type": ["n", "to", "n"], "path": "e.parquet", "source": "s", "destination": "d"}],
    }
    prepare(write_config(tmp_path, cfg, "nan.json"), tmp_path / "out")
    filled = np.where(np.isnan(x), np.nanmean(x), x)
    feat = load(tmp_path / "out").node_feats["n"]["feat"][:, 0]
    np.testing.assert_allclose(feat, (filled - filled.mean()) / filled.std(), rtol=1e-5, atol=1e-6)
    cfg["nodes"][0]["features"][0]["imputer"] = "none"
    with pytest.raises(InputError, match=r"2 values are missing \(rows 3, 500\)"):
        prepare(write_config(tmp_path, cfg, "nan.json"), tmp_path / "out2")


def test_columns_named_like_graphshards_own(tmp_path):
    rng = np.random.default_rng(2)
    table = pa.table({"key": np.arange(50), "nid": rng.normal(size=50), "value": rng.normal(size=50)})
    pq.write_table(table, tmp_path / "n.parquet")
    pq.write_table(pa.table({"s": [1, 2], "d": [2, 3]}), tmp_path / "e.parquet")
    features = [{"column": "nid", "transform": "rank_gauss"}, {"column": "value", "transform": "min_max"}]
    cfg = {
        "nodes": [{"type": "n", "path": "n.parquet", "id": "key", "features": features}],
        "edges": [{"type": ["n", "to", "n"], "path": "e.parquet", "source": "s", "destination": "d"}],
    }
    prepare(write_config(tmp_path, cfg, "names.json"), tmp_path / "out")
    feat = load(tmp_path / "out").node_feats["n"]["feat"]
    order = np.argsort(np.argsort(table.column("nid").to_numpy()))  # rank - 1 of each row
    np.testing.assert_allclose(feat[:, 0], ndtri((order + 0.5) / 50), rtol=1e-5)
    pq.write_table(table.append_column("__gs_nid", pa.array(np.arange(50))), tmp_path / "n.parquet")
    shutil.rmtree(tmp_path / "out")
    _refused(
        tmp_path, cfg | {"graph_name": "names"}, r"column '__gs_nid': names starting with __gs_ are graphshard's own"
    )

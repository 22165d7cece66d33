"""``serve --id-map``: requests name nodes by the users' own IDs (strings here), answers name them back, an ID
the map lacks is a 404 naming the field; the model's stand-in answers row i of graphshard's node i, so the
answer shows which node each user ID reached."""

from __future__ import annotations

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphshard.errors import FormatError, InputError
from graphshard.prepare.idmap import read_id_maps
from graphshard.serve.names import NodeNames

from .test_app import app


def _prepared(root, ids, ntype="n"):
    folder = root / "id_maps" / ntype
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"id": ids, "__gs_nid": np.arange(len(ids))}), folder / "data_0.parquet")
    return root


def test_requests_and_answers_in_the_users_ids(tmp_path):
    users = sorted(f"user-{i:03d}" for i in range(100))  # graphshard's ID of a user is its rank
    names = NodeNames.load(str(_prepared(tmp_path, users)), {"n": 100})
    with app(names=names) as (url, _):
        r = httpx.post(f"{url}/v1/predict", json={"nodes": ["user-042", "user-007"]})
        assert r.status_code == 200, r.text
        assert r.json()["nodes"] == ["user-042", "user-007"]
        assert r.json()["scores"] == [[42.0] * 3, [7.0] * 3]
        r = httpx.post(f"{url}/v1/predict", json={"nodes": ["user-042", "nobody"]})
        assert r.status_code == 404 and r.json()["field"] == "nodes[1]" and "'nobody'" in r.json()["error"]
        r = httpx.post(f"{url}/v1/predict", json={"nodes": [42]})  # a graphshard ID is no user's ID here
        assert r.status_code == 404 and r.json()["field"] == "nodes[0]"


def test_maps_checked_against_the_graph(tmp_path):
    prepared = _prepared(tmp_path, [3, 5, 9])
    assert NodeNames.load(str(prepared), {"_N": 3}).maps["_N"].lookup([9, 3])[0].tolist() == [2, 0]
    with pytest.raises(InputError, match="names 3 nodes, the graph has 4"):
        NodeNames.load(str(prepared), {"n": 4})
    with pytest.raises(InputError, match="no id_maps/ here"):
        read_id_maps(tmp_path / "id_maps")
    bad = _prepared(tmp_path / "bad", [5, 3, 9])  # not sorted: not a map prepare wrote
    with pytest.raises(FormatError, match="not in graphshard's order"):
        read_id_maps(bad)


def test_pairs_asked_and_answered_in_the_users_ids(tmp_path):
    from graphshard.serve.queries import GraphFacts

    users = sorted(f"u{i:02d}" for i in range(10))
    prepared = _prepared(tmp_path, users, "user")
    items = tmp_path / "id_maps" / "item"
    items.mkdir()
    pq.write_table(pa.table({"id": [10, 20, 30], "__gs_nid": [0, 1, 2]}), items / "data_0.parquet")
    names = NodeNames.load(str(prepared), {"user": 10, "item": 3})
    facts = GraphFacts({"user": 10, "item": 3}, ["user"], "feat", {}, stale=False, pair_types=("user", "item"))
    asked = names.request({"pairs": [["u03", 30], ["u09", 10]]}, facts)
    assert asked["pairs"] == [[3, 2], [9, 0]]
    assert names.answer({"pairs": asked["pairs"], "scores": [0.1, 0.2]}, facts)["pairs"] == [["u03", 30], ["u09", 10]]
    from graphshard.serve.queries import RequestError

    with pytest.raises(RequestError, match=r"pairs\[1\]\[1\]: node 40 of type 'item' is not in the ID map"):
        names.request({"pairs": [["u03", 30], ["u09", 40]]}, facts)


def test_a_map_of_many_files_reads_in_their_order(tmp_path):
    folder = tmp_path / "id_maps" / "n"
    folder.mkdir(parents=True)
    for i in range(12):  # part-00010 after part-00009, as prepare names them
        nid = np.arange(i * 5, i * 5 + 5)
        pq.write_table(pa.table({"id": nid * 3, "__gs_nid": nid}), folder / f"part-{i:05d}.parquet")
    ids = read_id_maps(tmp_path)["n"].ids
    np.testing.assert_array_equal(ids, np.arange(60) * 3)

"""A graph prepared from tables trains as the same graph given as NumPy arrays does: Cora written as a node
table (string IDs in shuffled order, its bag of words as a vector column, its classes as strings, its public
split as a column) and an edge table, prepared, then trained with ``train --dataset``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphshard.format.npyfile import read_npy
from graphshard.prepare import prepare
from graphshard.train import TrainOptions, train
from tests.graphs import shared_dataset

from .tables import id_map, load, write_config

pytest.importorskip("duckdb")


def _cora_tables(cora, root):
    rng = np.random.default_rng(0)
    feat, label = read_npy(cora / "feat.npy"), read_npy(cora / "label.npy")
    n = feat.shape[0]
    names = np.array([f"paper-{i}" for i in rng.permutation(n)])  # the users' IDs, in no useful order
    part = np.full(n, None, dtype=object)
    for split in ("train", "val", "test"):
        part[read_npy(cora / f"{split}_idx.npy")] = split
    order = rng.permutation(n)  # the table's rows in another order again
    nodes = pa.table(
        {
            "paper": names[order],
            "words": pa.FixedSizeListArray.from_arrays(pa.array(feat[order].astype(np.float32).ravel()), feat.shape[1]),
            "subject": np.array([f"class-{c}" for c in label])[order],
            "part": part[order],
        }
    )
    pq.write_table(nodes, root / "papers.parquet")
    src, dst = read_npy(cora / "src.npy"), read_npy(cora / "dst.npy")
    pq.write_table(pa.table({"citing": names[src], "cited": names[dst]}), root / "cites.parquet")
    return names, label


def test_prepared_cora_trains_as_the_numpy_cora(tmp_path):
    cora = shared_dataset("cora")
    names, label = _cora_tables(cora, tmp_path)
    config = {
        "graph_name": "cora",
        "nodes": [
            {
                "type": "paper",
                "path": "papers.parquet",
                "id": "paper",
                "features": [{"column": "words", "transform": "none"}],
                "label": {"column": "subject", "kind": "classification", "split": {"column": "part"}},
            }
        ],
        "edges": [
            {"type": ["paper", "cites", "paper"], "path": "cites.parquet", "source": "citing", "destination": "cited"}
        ],
    }
    out = tmp_path / "prepared"
    prepare(write_config(tmp_path, config), out)
    # the same graph: through the ID map, the prepared labels and splits are Cora's
    ids = id_map(out, "paper")
    original = {n: i for i, n in enumerate(names.tolist())}
    to_cora = np.array([original[x] for x in ids.tolist()])
    data = load(out).node_feats["paper"]
    np.testing.assert_array_equal(data["label"], label[to_cora])  # class-k sorts as k: Cora has 7 classes
    assert data["train_mask"].sum() == 140 and data["val_mask"].sum() == 500 and data["test_mask"].sum() == 1000
    accuracy = {}
    for name, dataset in (("tables", out), ("numpy", cora)):
        runs = [
            train(
                TrainOptions(fanouts=[10, 10], batch_size=140, epochs=30, seed=seed, progress=False),
                num_procs=1,
                dataset=str(dataset),
                work_dir=str(tmp_path / f"work-{name}"),
            )["test_acc"]
            for seed in (0, 1)
        ]
        accuracy[name] = float(np.mean(runs))
    assert abs(accuracy["tables"] - accuracy["numpy"]) <= 0.02, accuracy
    assert min(accuracy.values()) >= 0.76, accuracy

"""Link prediction: held-out edges really leave the partitioned graph; training on Cora (shared data)
and on the generated graph beats a random-score baseline by a wide margin."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from graphshard.datasets import community_graph, save_dataset
from graphshard.errors import FormatError
from graphshard.format.load import load_partition
from graphshard.tasks.link_split import (
    LinkSplit,
    load_link_split,
    open_link_split,
    read_held_out,
    save_link_split,
    split_edges,
)
from graphshard.train import TrainOptions, train
from graphshard.train.run import partition_dataset
from tests.graphs import shared_dataset
from tests.train.torchrun import torchrun_train


def _pairs(src, dst) -> set[tuple[int, int]]:
    return set(zip(np.asarray(src).tolist(), np.asarray(dst).tolist()))


def test_split_edges_holds_out_both_directions_of_a_link(tmp_path):
    g = community_graph(num_nodes=500, seed=4).graph
    (et,) = g.canonical_etypes
    before = _pairs(*g.edges[et])
    rest, held = split_edges(g, val_frac=0.1, test_frac=0.2, seed=1)
    after = _pairs(*rest.edges[et])
    val, test = _pairs(*held.val), _pairs(*held.test)
    links = {(min(u, v), max(u, v)) for u, v in before}
    assert len(val) == round(0.1 * len(links)) and len(test) == round(0.2 * len(links)) and not val & test
    for u, v in val | test:
        assert (u, v) in before or (v, u) in before  # a real link
        assert (u, v) not in after and (v, u) not in after  # gone both ways
    assert after == {(u, v) for u, v in before if (min(u, v), max(u, v)) not in val | test}
    save_link_split(held, tmp_path / "split.safetensors")
    back = load_link_split(tmp_path / "split.safetensors")
    assert back.etype == et and np.array_equal(back.val, held.val) and np.array_equal(back.test, held.test)


def test_held_out_edges_are_read_in_slices_and_checked(tmp_path):
    held = LinkSplit(("a", "r", "b"), np.array([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]), np.array([[4], [12]]))
    save_link_split(held, tmp_path / "split.safetensors")
    split = open_link_split(tmp_path / "split.safetensors")
    assert (split.etype, split.sizes) == (("a", "r", "b"), {"val": 5, "test": 1})
    assert np.array_equal(read_held_out(split, "val", 1, 4, num_nodes=(5, 10)), held.val[:, 1:4])
    assert read_held_out(split, "val", 5, 5).shape == (2, 0)
    with pytest.raises(FormatError, match=r"split.safetensors: tensor 'test' gives edge 0 the destination node ID 12"):
        read_held_out(split, "test", 0, 1, num_nodes=(5, 10))
    with pytest.raises(FormatError, match=r"tensor 'val' gives edge 4 the source node ID 4, outside \[0, 4\)"):
        read_held_out(split, "val", 2, 5, num_nodes=(4, 10))
    save_file(
        {"val": torch.zeros((2, 3), dtype=torch.int32), "test": torch.zeros((2, 1), dtype=torch.int64)},
        str(tmp_path / "int32.safetensors"),
        metadata={"edge_type": "a:r:b"},
    )
    with pytest.raises(FormatError, match=r"int32.safetensors: tensor 'val' must be int64 of shape \(2, E\)"):
        open_link_split(tmp_path / "int32.safetensors")


def test_a_damaged_link_split_is_refused(tmp_path):
    bad = tmp_path / "split.safetensors"
    bad.write_bytes(b"not safetensors")
    with pytest.raises(FormatError, match="split.safetensors"):
        load_link_split(bad)


def test_partitions_for_link_prediction_lack_the_held_out_edges(tmp_path):
    save_dataset(community_graph(num_nodes=800, seed=5), tmp_path / "data")
    config, split_file = partition_dataset(str(tmp_path / "data"), str(tmp_path / "parts"), 2, link=True)
    held = load_link_split(split_file)
    present = set()
    for p in range(2):
        part = load_partition(config, p)
        g, book = part.graph, part.partition_book
        indptr = g.indptr.numpy()
        inner = g.edata["inner_edge"].numpy().astype(bool)
        dst = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))[inner]
        gid = g.ndata["_ID"].numpy()
        src = book.to_original("_N", gid[g.indices.numpy()[inner]]).numpy()
        present |= _pairs(src, book.to_original("_N", gid[dst]).numpy())
    for u, v in _pairs(*held.val) | _pairs(*held.test):
        assert (u, v) not in present and (v, u) not in present
    assert present  # the rest of the graph is there


def test_cora_link_prediction_beats_random_scores(tmp_path):
    m = train(
        TrainOptions(task="link", fanouts=[10, 10], batch_size=512, epochs=3, lr=0.005, progress=False),
        num_procs=2,
        dataset=str(shared_dataset("cora")),
        work_dir=str(tmp_path),
    )
    # random scores: MRR = H(101)/101 ~ 0.05 against 100 negatives, AUC = 0.5 (measured ~0.35 and ~0.88)
    assert m["test_mrr"] > 4 * m["random_mrr"], m
    assert m["test_auc"] > 0.8, m
    assert all(0 <= e["val_auc"] <= 1 for e in m["epochs"])
    assert m["test_metrics"] == {"mrr": m["test_mrr"], "auc": m["test_auc"], "hits@10": m["test_hits@10"]}
    assert m["val_metrics"]["mrr"] == m["val_mrr"]


def test_mlp_decoder_on_the_generated_graph(tmp_path):
    save_dataset(community_graph(num_nodes=2000, noise=4.0, seed=6), tmp_path / "data")
    m = train(
        TrainOptions(
            task="link",
            decoder="mlp",
            fanouts=[5, 5],
            batch_size=256,
            epochs=2,
            progress=False,
            save_embeddings=str(tmp_path / "emb.npy"),
        ),
        num_procs=1,
        dataset=str(tmp_path / "data"),
        work_dir=str(tmp_path),
    )
    assert m["test_auc"] > 0.75 and m["test_mrr"] > 3 * m["random_mrr"], m
    assert np.load(tmp_path / "emb.npy", allow_pickle=False).shape == (2000, 64)


def test_link_training_from_a_dataset_under_torchrun(tmp_path):
    """Under torchrun, --dataset is partitioned inside the job (once per host) and held out as usual."""
    save_dataset(community_graph(num_nodes=1500, seed=7), tmp_path / "data")
    m = torchrun_train(
        [
            "--dataset",
            str(tmp_path / "data"),
            "--work-dir",
            str(tmp_path / "work"),
            "--task",
            "link",
            "--epochs",
            "1",
            "--fanouts",
            "3,3",
            "--batch-size",
            "256",
        ],
        tmp_path / "m.json",
    )
    assert (m["world_size"], m["num_parts"]) == (2, 2) and 0.5 < m["test_auc"] <= 1.0
    host = tmp_path / "work" / "2parts-metis" / "host0"
    assert [p.relative_to(host).parts[1:] for p in host.glob("*/link/link_split.safetensors")] == [
        ("link", "link_split.safetensors")
    ]
    assert Path(m["part_config"]).parent == next(host.resolve().glob("*/link"))  # where it partitioned, for embed

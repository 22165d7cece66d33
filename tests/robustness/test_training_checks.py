"""Training stops on NaN/infinite features or losses and on labels outside the classes, naming the culprit."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphshard.datasets import community_graph, save_dataset
from graphshard.distributed.ranks.context import DistError
from graphshard.errors import InputError
from graphshard.tasks.checks import num_classes_of
from graphshard.train import TrainOptions, train

KW = dict(epochs=1, fanouts=[3, 3], batch_size=64, hidden=16, progress=False, timeout=60)


@pytest.fixture
def data(tmp_path):
    save_dataset(community_graph(num_nodes=600, seed=3), tmp_path / "d")
    return tmp_path / "d"


def test_nan_feature_stops_training_naming_the_node(data, tmp_path):
    feat = np.load(data / "feat.npy")
    feat[123, 4] = np.nan
    np.save(data / "feat.npy", feat)
    with pytest.raises(DistError, match=r"feature 'feat' of '_N' node 123 \(original ID\) is not finite"):
        train(TrainOptions(**KW), num_procs=2, dataset=str(data), work_dir=str(tmp_path / "w"))
    m = train(TrainOptions(allow_nonfinite=True, **KW), num_procs=1, dataset=str(data), work_dir=str(tmp_path / "w"))
    assert len(m["epochs"]) == 1  # allowed on request


def test_diverging_loss_stops_at_the_first_bad_step(data, tmp_path):
    with pytest.raises(DistError, match=r"the training loss is nan at epoch 0, batch \d+ \(rank 0\)"):
        train(TrainOptions(**{**KW, "lr": 1e30}), num_procs=1, dataset=str(data), work_dir=str(tmp_path / "w"))


def test_label_outside_declared_classes(data, tmp_path):
    label = np.load(data / "label.npy")
    train_idx = np.load(data / "train_idx.npy")
    label[train_idx[5]] = 8  # the generator declares 8 classes: 0..7
    np.save(data / "label.npy", label)
    assert json.loads((data / "meta.json").read_text())["num_classes"] == 8
    # the partition config records the dataset's 8 classes; the error names the node and the file of its label
    with pytest.raises(
        DistError,
        match=rf"'_N' node {train_idx[5]} \(original ID, label read from \S+/part0/"
        r"node_feats.safetensors\) of a train/val/test split has label 8, outside "
        r"the 8 classes declared by the partition config \S+\.json",
    ):
        train(TrainOptions(**KW), num_procs=1, dataset=str(data), work_dir=str(tmp_path / "w"))


def test_class_count_rules():
    labels = np.array([0, 2, -1, 1, 7])
    masks = {"train": np.array([1, 1, 0, 1, 0], bool), "val": np.array([0, 0, 0, 0, 0], bool)}
    assert num_classes_of(labels, masks, None, "t") == 3  # unlabelled nodes outside the splits are not read
    assert num_classes_of(labels, masks, 5, "t") == 5
    with pytest.raises(InputError, match="node 1 .* label 2, outside the 2 classes declared by --num-classes"):
        num_classes_of(labels, masks, 2, "t")
    masks["val"][2] = True
    with pytest.raises(InputError, match="node 2 .* label -1"):
        num_classes_of(labels, masks, None, "t")
    with pytest.raises(InputError, match=r"option num_classes: expected an integer in \[1, inf\) \(or null\), got 0"):
        TrainOptions(num_classes=0).check()
    # no declared count: a label far beyond the labelled nodes is refused, not a 10**6-wide output layer
    labels, used = np.array([0, 1, 10**6, 1]), {"train": np.array([1, 1, 1, 1], bool)}
    with pytest.raises(InputError, match=r"node 12 .* label 1000000, which would make 1000001 classes for 4"):
        num_classes_of(labels, used, None, "t", to_original=lambda ids: ids + 10)
    assert num_classes_of(labels, used, 10**6 + 1, "t") == 10**6 + 1  # unless that many classes are declared

"""Training and embed check the partitions they serve against the config's checksums, and labels against the
class count the partition config records."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphshard.cli import main
from graphshard.datasets import community_graph, save_dataset
from graphshard.distributed.ranks.context import DistError
from graphshard.format.config import read_config
from graphshard.train import TrainOptions, embed, train

KW = dict(epochs=1, fanouts=[3, 3], batch_size=64, hidden=16, progress=False, timeout=60)


@pytest.fixture
def data(tmp_path):
    save_dataset(community_graph(num_nodes=600, num_classes=8, seed=3), tmp_path / "d")
    return tmp_path / "d"


def _partition(data, out) -> str:
    assert main(["partition", "--dataset", str(data), "--num-parts", "2", "--out", str(out)]) == 0
    return str(next(out.glob("*.json")))


def test_corrupt_partition_is_refused_by_train_and_embed(data, tmp_path, capsys):
    config = _partition(data, tmp_path / "p")
    feats = read_config(config).part_path(0, "node_feats")
    raw = bytearray(feats.read_bytes())
    before = len(raw)
    raw[-256:] = np.random.default_rng(0).standard_normal(64).astype(np.float32).tobytes()  # 64 values, in place
    feats.write_bytes(bytes(raw))
    assert feats.stat().st_size == before
    culprit = rf"host 127\.0\.0\.1 \(rank0\): {feats}: sha256 does not match .*--no-verify skips this check"
    with pytest.raises(DistError, match=culprit):
        train(TrainOptions(part_config=config, **KW), num_procs=2)
    # the explicit opt-out trains (and leaves the checkpoint embed is given below)
    m = train(TrainOptions(part_config=config, verify=False, checkpoint=str(tmp_path / "ck"), **KW), num_procs=2)
    assert m["complete"] and len(m["epochs"]) == 1
    with pytest.raises(DistError, match=culprit):
        embed(config, tmp_path / "ck", tmp_path / "emb.npy", num_procs=2, timeout=60)
    assert not (tmp_path / "emb.npy").exists()


def test_labels_are_checked_against_the_recorded_class_count(data, tmp_path):
    assert json.loads((data / "meta.json").read_text())["num_classes"] == 8
    label, train_idx = np.load(data / "label.npy"), np.load(data / "train_idx.npy")
    label[train_idx[7]] = 99  # one bad label: without the recorded count, a 100-class model would be built
    np.save(data / "label.npy", label)
    config = _partition(data, tmp_path / "p")
    assert read_config(config).num_classes == 8
    with pytest.raises(
        DistError,
        match=rf"'_N' node {train_idx[7]} \(original ID, label read from \S+node_feats"
        r"\.safetensors\) of a train/val/test split has label 99, outside the 8 "
        r"classes declared by the partition config \S+\.json",
    ):
        train(TrainOptions(part_config=config, **KW), num_procs=1)


def test_configs_without_a_class_count_still_load(data, tmp_path):
    config = _partition(data, tmp_path / "p")
    raw = json.loads(open(config).read())
    assert raw.pop("num_classes") == 8
    open(config, "w").write(json.dumps(raw))
    assert read_config(config).num_classes is None
    raw["num_classes"] = "8"
    open(config, "w").write(json.dumps(raw))
    with pytest.raises(ValueError, match=r"key 'num_classes' must be an integer >= 1, got '8'"):
        read_config(config)

"""``graphshard embed`` rebuilds a trained model from its checkpoint and writes the outputs the training
run itself saved (homogeneous node task; heterogeneous with learnt inputs of featureless types)."""

from __future__ import annotations

import numpy as np
import pytest

from graphshard import InputError, partition_graph
from graphshard.cli import main
from graphshard.datasets import hetero_graph, save_dataset
from graphshard.infer import embed
from graphshard.train import TrainOptions, train
from tests.graphs import small_homo


def test_embed_from_a_checkpoint_writes_what_training_saved(tmp_path, capsys):
    partition_graph(small_homo(), "s", 2, tmp_path / "p", part_method="metis")
    config, ckpt = str(tmp_path / "p" / "s.json"), str(tmp_path / "ckpt")
    train(TrainOptions(part_config=config, epochs=2, fanouts=[3, 3], batch_size=64, progress=False, checkpoint=ckpt,
                       save_embeddings=str(tmp_path / "trained.npy")), num_procs=2)
    assert main(["embed", "--part-config", config, "--checkpoint", ckpt, "--out", str(tmp_path / "e.npy"),
                 "--num-procs", "2"]) == 0
    assert "wrote every node's output" in capsys.readouterr().out
    trained = np.load(tmp_path / "trained.npy", allow_pickle=False)
    assert trained.shape == (240, 4)
    np.testing.assert_array_equal(np.load(tmp_path / "e.npy", allow_pickle=False), trained)
    with pytest.raises(InputError, match="written by 2 ranks; run embed on 2"):
        embed(config, ckpt, tmp_path / "x.npy", num_procs=1)
    with pytest.raises(InputError, match="no checkpoint here"):
        embed(config, tmp_path / "nothing", tmp_path / "x.npy", num_procs=2)


def test_embed_heterogeneous_with_learnt_inputs(tmp_path):
    save_dataset(hetero_graph(num_papers=600, num_authors=250, num_institutions=10, num_fields=8, seed=1),
                 tmp_path / "data")
    kw = dict(fanouts=[3, 3], batch_size=128, progress=False, hidden=8, epochs=1)
    ckpt = str(tmp_path / "ckpt")
    train(TrainOptions(checkpoint=ckpt, save_embeddings=str(tmp_path / "trained"), **kw), num_procs=2,
          dataset=str(tmp_path / "data"), work_dir=str(tmp_path / "w"))
    (config,) = [p for p in (tmp_path / "w").rglob("*.json") if p.parent.name == "node" and not p.name.startswith(".")]
    embed(config, ckpt, tmp_path / "e", num_procs=2)
    assert sorted(f.name for f in (tmp_path / "trained").glob("*.npy")) == ["paper.npy"]
    for f in (tmp_path / "trained").glob("*.npy"):
        np.testing.assert_array_equal(np.load(tmp_path / "e" / f.name), np.load(f))

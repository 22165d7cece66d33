"""``graphshard embed`` rebuilds a trained model from its checkpoint and writes the outputs the training
run itself saved (homogeneous node task; heterogeneous with learnt inputs of featureless types)."""

from __future__ import annotations

import numpy as np
import pytest

from graphshard import InputError, partition_graph
from graphshard.cli import main
from graphshard.datasets import hetero_graph, save_dataset
from graphshard.train import TrainOptions, embed, train
from tests.graphs import small_homo


def test_embed_from_a_checkpoint_writes_what_training_saved(tmp_path, capsys):
    partition_graph(small_homo(), "s", 2, tmp_path / "p", part_method="metis")
    config, ckpt = str(tmp_path / "p" / "s.json"), str(tmp_path / "ckpt")
    train(
        TrainOptions(
            part_config=config,
            epochs=2,
            fanouts=[3, 3],
            batch_size=64,
            progress=False,
            checkpoint=ckpt,
            save_embeddings=str(tmp_path / "trained.npy"),
        ),
        num_procs=2,
    )
    # training saves the best validation epoch's outputs: best/ holds its checkpoint
    assert (
        main(
            [
                "embed",
                "--part-config",
                config,
                "--checkpoint",
                f"{ckpt}/best",
                "--out",
                str(tmp_path / "e.npy"),
                "--num-procs",
                "2",
            ]
        )
        == 0
    )
    assert "wrote every node's output" in capsys.readouterr().out
    trained = np.load(tmp_path / "trained.npy", allow_pickle=False)
    assert trained.shape == (240, 4)
    np.testing.assert_array_equal(np.load(tmp_path / "e.npy", allow_pickle=False), trained)
    with pytest.raises(InputError, match="written by 2 ranks; run it on 2"):
        embed(config, ckpt, tmp_path / "x.npy", num_procs=1)
    with pytest.raises(InputError, match="no checkpoint here"):
        embed(config, tmp_path / "nothing", tmp_path / "x.npy", num_procs=2)
    # predicted not to fit (the planner's layer-wise figure, which is hundreds of MiB a rank): refused at once
    with pytest.raises(InputError, match=r"embed is predicted to need .* than the 0\.10 GiB allowed .*spread the"):
        embed(config, ckpt, tmp_path / "x.npy", num_procs=2, memory="100M")
    assert not (tmp_path / "x.npy").exists()


def test_embed_heterogeneous_with_learnt_inputs(tmp_path):
    save_dataset(
        hetero_graph(num_papers=600, num_authors=250, num_institutions=10, num_fields=8, seed=1), tmp_path / "data"
    )
    kw = dict(fanouts=[3, 3], batch_size=128, progress=False, hidden=8, epochs=1)
    ckpt = str(tmp_path / "ckpt")
    train(
        TrainOptions(checkpoint=ckpt, save_embeddings=str(tmp_path / "trained"), **kw),
        num_procs=2,
        dataset=str(tmp_path / "data"),
        work_dir=str(tmp_path / "w"),
    )
    (config,) = [p for p in (tmp_path / "w").rglob("*.json") if p.parent.name == "node" and not p.name.startswith(".")]
    embed(config, f"{ckpt}/best", tmp_path / "e", num_procs=2)
    assert sorted(f.name for f in (tmp_path / "trained").glob("*.npy")) == ["paper.npy"]
    for f in (tmp_path / "trained").glob("*.npy"):
        np.testing.assert_array_equal(np.load(tmp_path / "e" / f.name), np.load(f))


def test_hidden_embeddings_are_the_layer_before_the_output_on_the_whole_graph(tmp_path):
    """``--embedding-layer hidden`` writes ReLU(first SAGEConv) of the selected weights, computed here on the
    whole, unpartitioned graph with PyG's layer (in original ID order)."""
    import torch

    from graphshard.models import GraphSAGE
    from graphshard.tasks.checkpoint import read_state, read_weights

    g = small_homo()
    partition_graph(g, "s", 2, tmp_path / "p", part_method="metis")
    config, ckpt = str(tmp_path / "p" / "s.json"), str(tmp_path / "ckpt")
    m = train(
        TrainOptions(
            part_config=config,
            epochs=3,
            fanouts=[3, 3],
            batch_size=64,
            hidden=12,
            progress=False,
            checkpoint=ckpt,
            save_embeddings=str(tmp_path / "h.npy"),
            embedding_layer="hidden",
        ),
        num_procs=2,
    )
    epoch, weights, _ = read_weights(f"{ckpt}/best/rank0")
    assert epoch == m["best_epoch"] == read_state(f"{ckpt}/best/rank0")["epoch"]
    x = torch.from_numpy(g.node_feats["_N"]["feat"]).float()
    model = GraphSAGE(x.shape[1], 12, 4, 2, dropout=0.5)
    model.load_state_dict(weights)
    src, dst = g.edges[("_N", "_E", "_N")]
    with torch.no_grad():
        want = torch.relu(model.convs[0](x, torch.from_numpy(np.stack([src, dst])).long())).numpy()
    got = np.load(tmp_path / "h.npy", allow_pickle=False)
    assert got.shape == (240, 12)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert (
        main(
            [
                "embed",
                "--part-config",
                config,
                "--checkpoint",
                f"{ckpt}/best",
                "--embedding-layer",
                "hidden",
                "--out",
                str(tmp_path / "again.npy"),
                "--num-procs",
                "2",
            ]
        )
        == 0
    )
    np.testing.assert_array_equal(np.load(tmp_path / "again.npy"), got)

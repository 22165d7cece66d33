"""Learning-rate schedules and weight decay: the schedule's values by its definition, the rates a run
actually used, weight decay reaching the optimiser, and both refused when a checkpoint was made without them."""

from __future__ import annotations

import math

import pytest
from safetensors.torch import load_file

from graphshard.cli import main
from graphshard.datasets import community_graph, save_dataset
from graphshard.errors import InputError
from graphshard.tasks.checkpoint import RESUME_OPTIONS
from graphshard.tasks.schedule import lr_at
from graphshard.train import TrainOptions, train


def test_schedules_by_definition():
    assert [lr_at("constant", 0.1, e, 10) for e in (0, 5, 9)] == [0.1, 0.1, 0.1]
    assert lr_at("cosine", 0.1, 0, 10) == pytest.approx(0.1)
    assert lr_at("cosine", 0.1, 5, 10) == pytest.approx(0.05)
    assert lr_at("cosine", 0.1, 9, 10) == pytest.approx(0.05 * (1 + math.cos(math.pi * 0.9)))
    assert [lr_at("step", 0.1, e, 10, step=3, gamma=0.5) for e in range(7)] == pytest.approx(
        [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025]
    )


def test_options_are_checked():
    for bad in (
        dict(lr_schedule="linear"),
        dict(lr_gamma=0.0),
        dict(lr_gamma=1.5),
        dict(lr_step=0),
        dict(weight_decay=-1.0),
    ):
        with pytest.raises(InputError):
            TrainOptions(part_config="x.json", **bad).check()
    assert main(["train", "--part-config", "x.json", "--lr-gamma", "2"]) == 2
    assert {"weight_decay", "lr_schedule", "lr_step", "lr_gamma"} <= set(RESUME_OPTIONS)


def _weight_norm(checkpoint) -> float:
    tensors = load_file(str(checkpoint / "rank0" / "checkpoint.safetensors"))
    return float(sum((v.float() ** 2).sum() for k, v in tensors.items() if k.startswith("model/") and "weight" in k))


def test_a_run_uses_the_schedule_and_weight_decay(tmp_path):
    save_dataset(community_graph(num_nodes=2000, noise=8.0, seed=7), tmp_path / "data")
    kw = dict(fanouts=[5, 5], batch_size=256, epochs=3, progress=False, eval_every=0)
    runs = {
        wd: train(
            TrainOptions(
                lr=0.02,
                lr_schedule="step",
                lr_step=2,
                lr_gamma=0.5,
                weight_decay=wd,
                checkpoint=str(tmp_path / f"ckpt{wd}"),
                **kw,
            ),
            num_procs=2,
            dataset=str(tmp_path / "data"),
            work_dir=str(tmp_path / "w"),
        )
        for wd in (0.0, 1.0)
    }
    assert [e["lr"] for e in runs[0.0]["epochs"]] == pytest.approx([0.02, 0.02, 0.01])
    # the same start and batches; the penalty pulls the weights towards zero
    assert _weight_norm(tmp_path / "ckpt1.0") < 0.8 * _weight_norm(tmp_path / "ckpt0.0")

"""The GPU's batch path, rehearsed on the CPU (``TrainOptions.rehearse``: batches copied through reused device
buffers, the device cache in host memory, step times and losses read at the epoch's end): node and link
training, homogeneous and heterogeneous, give exactly the losses and results of the plain CPU path; the split
gains ``copy_s``; and bf16 autocast trains to the accuracy of fp32."""

from __future__ import annotations

import pytest

from graphshard.datasets import community_graph, hetero_graph, save_dataset
from graphshard.train import TrainOptions, train
from tests.graphs import shared_dataset

KW = dict(fanouts=[5, 5], batch_size=256, epochs=2, progress=False, colocated=False)


def _losses(run):
    return [e["train_loss"] for e in run["epochs"]]


@pytest.mark.parametrize("task", ["node", "link"])
def test_the_device_path_trains_exactly_as_the_cpu_path(tmp_path, task):
    save_dataset(community_graph(num_nodes=3000, noise=8.0, seed=4), tmp_path / "data")
    runs = [
        train(
            TrainOptions(task=task, **extra, **KW), num_procs=2, dataset=str(tmp_path / "data"), work_dir=str(tmp_path)
        )
        for extra in ({}, {"rehearse": True}, {"rehearse": True, "cache_device": "cuda", "cache_mb": 0.2})
    ]
    metric = "test_acc" if task == "node" else "test_mrr"
    assert runs[0][metric] == runs[1][metric] == runs[2][metric]
    assert _losses(runs[0]) == _losses(runs[1]) == _losses(runs[2])
    plain, copied, cached = (r["epochs"][-1] for r in runs)
    assert plain["copy_bytes"] == 0 and copied["copy_bytes"] > 0 and copied["copy_s"] > 0
    # the device cache's hits are rows that were neither fetched nor copied
    assert 0 < cached["device_cache_hits"] <= cached["device_cache_asked"]
    assert cached["copy_bytes"] < copied["copy_bytes"] and cached["fetch_bytes"] < copied["fetch_bytes"]
    assert runs[2]["cache_device"] == "cpu" and runs[2]["cache_rows"] > 0 and "cache_rows" not in runs[1]


def test_the_device_path_on_a_heterogeneous_graph_with_learnt_inputs(tmp_path):
    ds = hetero_graph(num_papers=800, num_authors=300, num_institutions=20, num_fields=10, noise=6.0, seed=3)
    save_dataset(ds, tmp_path / "data")
    runs = [
        train(
            TrainOptions(model="rgcn", **extra, **KW),
            num_procs=2,
            dataset=str(tmp_path / "data"),
            work_dir=str(tmp_path),
        )
        for extra in ({}, {"rehearse": True})
    ]
    assert _losses(runs[0]) == _losses(runs[1]) and runs[0]["test_acc"] == runs[1]["test_acc"]


@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_bf16_mixed_trains_as_fp32(tmp_path, name):
    data = shared_dataset(name)
    kw = dict(epochs=20, progress=False, seed=1)
    fp32, bf16 = (
        train(TrainOptions(precision=p, **kw), num_procs=2, dataset=str(data), work_dir=str(tmp_path))
        for p in ("fp32", "bf16-mixed")
    )
    assert abs(fp32["test_acc"] - bf16["test_acc"]) <= 0.02
    assert fp32["test_acc"] > 0.6 and _losses(fp32) != _losses(bf16)  # autocast did change the arithmetic


def test_the_device_path_with_sampler_workers(tmp_path):
    """Batches built in worker processes are staged into the pool and copied like the training process's own."""
    save_dataset(community_graph(num_nodes=3000, noise=8.0, seed=4), tmp_path / "data")
    runs = [
        train(
            TrainOptions(num_workers=1, **extra, **KW),
            num_procs=2,
            dataset=str(tmp_path / "data"),
            work_dir=str(tmp_path),
        )
        for extra in ({}, {"rehearse": True})
    ]
    assert _losses(runs[0]) == _losses(runs[1]) and runs[1]["epochs"][-1]["copy_bytes"] > 0


def test_heterogeneous_link_prediction_on_the_device_path(tmp_path):
    ds = hetero_graph(num_papers=800, num_authors=300, num_institutions=20, num_fields=10, noise=6.0, seed=3)
    save_dataset(ds, tmp_path / "data")
    kw = dict(task="link", model="rgcn", edge_type="author:writes:paper", **KW)
    runs = [
        train(TrainOptions(**extra, **kw), num_procs=2, dataset=str(tmp_path / "data"), work_dir=str(tmp_path))
        for extra in ({}, {"rehearse": True})
    ]
    assert _losses(runs[0]) == _losses(runs[1]) and runs[0]["test_mrr"] == runs[1]["test_mrr"]


@pytest.mark.parametrize(
    ("targets", "extra"),
    [
        (dict(targets="regression"), {}),
        (dict(targets="multilabel"), {}),
        (dict(edge_targets="classes"), dict(task="edge")),
        (dict(edge_targets="regression"), dict(task="edge", edge_decoder="distmult")),
        (dict(), dict(task="link", negatives="hard", neg_ratio=2)),
    ],
)
def test_every_task_takes_the_device_path_exactly(tmp_path, targets, extra):
    """Float and 2-D labels, labelled edges (their labels attached on the host) and the loader's negatives
    reach the model through the device buffers unchanged."""
    save_dataset(community_graph(num_nodes=1500, avg_degree=8, noise=6.0, seed=4, **targets), tmp_path / "data")
    runs = [
        train(TrainOptions(**extra, **more, **KW), num_procs=2, dataset=str(tmp_path / "data"), work_dir=str(tmp_path))
        for more in ({}, {"rehearse": True})
    ]
    assert _losses(runs[0]) == _losses(runs[1])
    assert runs[0].get("test_metrics") == runs[1].get("test_metrics")
    assert runs[0].get("test_mrr") == runs[1].get("test_mrr")
    assert runs[1]["epochs"][-1]["copy_bytes"] > 0

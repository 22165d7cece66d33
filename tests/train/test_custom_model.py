"""The user's own model, ``--model package.module:factory``: it trains with everything ``train`` offers,
``embed`` rebuilds it from a checkpoint, a model without layer-wise inference is evaluated on sampled full
neighbourhoods (said once), and a factory that cannot train is one line naming it, before the first epoch.
(Layer-wise inference of PyG's own models is checked against their full-graph forward in tests/infer.)"""

from __future__ import annotations

import numpy as np
import pytest

from graphshard import partition_graph
from graphshard.cli import main
from graphshard.datasets import community_graph
from graphshard.train import TrainOptions, embed, train

FACTORIES = "tests.train.custom_factories"


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("custom")
    ds = community_graph(num_nodes=1000, num_classes=4, avg_degree=8, noise=3.0, seed=2)
    partition_graph(ds.graph, "g", 2, tmp / "p", part_method="metis")
    labels = ds.graph.node_feats["_N"]["label"]
    return str(tmp / "p" / "g.json"), float(np.bincount(labels).max() / labels.size)


def test_users_pyg_model_trains_and_embed_rebuilds_it(graph, tmp_path):
    config, majority = graph
    opts = TrainOptions(
        part_config=config,
        model=f"{FACTORIES}:pyg_sage",
        fanouts=[5, 5],
        batch_size=64,
        epochs=5,
        hidden=16,
        checkpoint=str(tmp_path / "ckpt"),
        save_embeddings=str(tmp_path / "train.npy"),
        progress=False,
    )
    metrics = train(opts, num_procs=2)
    losses = [e["train_loss"] for e in metrics["epochs"]]
    assert losses[-1] < losses[0] and metrics["test_acc"] > majority + 0.15, (losses, metrics["test_acc"])
    embed(config, tmp_path / "ckpt" / "best", tmp_path / "embed.npy", num_procs=2)
    trained, embedded = np.load(tmp_path / "train.npy"), np.load(tmp_path / "embed.npy")
    assert trained.shape == (1000, 4)
    np.testing.assert_allclose(embedded, trained, atol=1e-5)  # the same weights, rebuilt by embed


def test_a_model_without_layerwise_inference_is_evaluated_on_sampled_neighbourhoods(graph, tmp_path, capfd):
    config, majority = graph
    argv = [
        "train",
        "--part-config",
        config,
        "--num-procs",
        "2",
        "--model",
        f"{FACTORIES}:on_batch",
        "--fanouts",
        "5,5",
        "--batch-size",
        "64",
        "--epochs",
        "4",
        "--hidden",
        "16",
        "--metrics-out",
        str(tmp_path / "m.json"),
    ]
    assert main(argv) == 0
    err = capfd.readouterr().err
    assert err.count("offers no layer-wise inference") == 1, err
    import json

    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["test_acc"] > majority + 0.15, metrics["test_acc"]  # it trains although a parameter is unused


@pytest.mark.parametrize(
    "factory, message",
    [
        ("no_such_factory", "has no function 'no_such_factory'"),
        ("not_a_module", "returned a str, not a torch.nn.Module"),
        ("wrong_width", "expected ("),
        ("constant", "does not depend on the batch"),
    ],
)
def test_a_factory_that_cannot_train_is_one_line_naming_it(graph, capfd, factory, message):
    config, _ = graph
    capfd.readouterr()
    argv = ["train", "--part-config", config, "--num-procs", "1", "--model", f"{FACTORIES}:{factory}", "--epochs", "1"]
    assert main(argv) == 2
    err = capfd.readouterr().err.strip()
    assert "Traceback" not in err and message in err and f"--model {FACTORIES}:{factory}" in err, err
    assert "epoch" not in err.lower(), err  # before the first epoch


def test_a_module_that_does_not_import_is_named_before_any_process_starts(graph, capfd):
    config, _ = graph
    capfd.readouterr()
    assert main(["train", "--part-config", config, "--num-procs", "2", "--model", "no_such_package.models:build"]) == 2
    err = capfd.readouterr().err
    assert "cannot import no_such_package.models: ModuleNotFoundError" in err and "Traceback" not in err, err


def _installed_graphshard():
    import sys
    from pathlib import Path

    script = Path(sys.executable).with_name("graphshard")
    if not script.exists():
        pytest.skip("the graphshard console script is not installed next to this Python")
    return str(script)


def test_the_installed_command_imports_the_users_module_from_the_working_directory(graph, tmp_path):
    """As the README shows it: my_models.py beside the user, the installed `graphshard` command (not
    `python -m`, whose path starts at the working directory) finds it; an import that fails is named
    before partitioning (--dataset) or starting a rank."""
    import re
    import subprocess
    from pathlib import Path

    from graphshard.datasets.layout import save_dataset

    config, _ = graph
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if b.startswith("# my_models.py"))
    (tmp_path / "my_models.py").write_text(block)
    command = [_installed_graphshard(), "train", "--part-config", config, "--num-procs", "2", "--epochs", "1"]
    run = subprocess.run(
        [*command, "--model", "my_models:gat", "--checkpoint", "ckpt"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0 and "test accuracy" in run.stdout, run.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"  # embed where my_models.py is not: named before any rank starts
    elsewhere.mkdir()
    embed_cmd = [_installed_graphshard(), "embed", "--part-config", config, "--checkpoint", str(tmp_path / "ckpt")]
    lost = subprocess.run(
        [*embed_cmd, "--out", "emb.npy", "--num-procs", "2"], cwd=elsewhere, capture_output=True, text=True, timeout=120
    )
    assert lost.returncode != 0 and "cannot import my_models" in lost.stderr, lost.stderr[-2000:]
    assert "Traceback" not in lost.stderr and "TensorPipe" not in lost.stderr, lost.stderr[-2000:]
    (tmp_path / "broken.py").write_text("import no_such_package_here\n")
    data = tmp_path / "data"
    save_dataset(community_graph(num_nodes=200, seed=1), data)
    bad = subprocess.run(
        [_installed_graphshard(), "train", "--dataset", str(data), "--num-procs", "2", "--model", "broken:f"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode != 0 and "cannot import broken" in bad.stderr, bad.stderr[-2000:]
    assert "Traceback" not in bad.stderr and not (tmp_path / "out").exists(), "partitioned before the check"

"""The end-to-end time account: every phase of a run is named, the phases and `other` add up to the wall
time measured around the call, and almost nothing is left unaccounted."""

from __future__ import annotations

import time

import pytest

from graphshard.cli import main
from graphshard.datasets import community_graph, save_dataset
from graphshard.tasks.timing import PHASES, closing_account, describe
from graphshard.train import TrainOptions, train


def test_closing_account_adds_up():
    rank = {"startup_s": 2.0, "epochs_s": 5.0, "evaluation_s": 1.0, "ignored": 9.0}
    account = closing_account(rank, 10.0, partition_s=1.5, spawn_s=0.4, shutdown_s=None)
    assert account["other_s"] == pytest.approx(0.1)
    assert sum(account[k] for k in PHASES if k in account) + account["other_s"] == pytest.approx(10.0)
    assert "ignored" not in account and "shutdown_s" not in account
    text = describe(account)
    assert text.startswith("10.0 s end to end = partitioning 1.5 + starting processes 0.4 + start-up 2.0")
    assert text.endswith("other 0.1")


def test_a_run_accounts_for_its_time(tmp_path, capsys):
    save_dataset(community_graph(num_nodes=2000, noise=8.0, seed=5), tmp_path / "data")
    opts = TrainOptions(
        fanouts=[5, 5],
        batch_size=256,
        epochs=2,
        progress=False,
        checkpoint=str(tmp_path / "ckpt"),
        save_embeddings=str(tmp_path / "emb.npy"),
    )
    start = time.perf_counter()
    m = train(opts, num_procs=2, dataset=str(tmp_path / "data"), work_dir=str(tmp_path / "work"))
    wall = time.perf_counter() - start
    t = m["time"]
    for phase in (
        "partition_s",
        "spawn_s",
        "startup_s",
        "epochs_s",
        "evaluation_s",
        "embeddings_s",
        "checkpoint_s",
        "shutdown_s",
    ):
        assert t[phase] > 0, phase
    assert t["total_s"] <= wall and t["total_s"] > 0.95 * wall
    assert sum(t[k] for k in PHASES if k in t) + t["other_s"] == pytest.approx(t["total_s"])
    assert t["other_s"] < 0.05 * t["total_s"], t
    assert t["epochs_s"] == pytest.approx(sum(e["wall_s"] for e in m["epochs"]), abs=0.3)

    assert (
        main(
            [
                "train",
                "--dataset",
                str(tmp_path / "data"),
                "--work-dir",
                str(tmp_path / "work"),
                "--num-procs",
                "2",
                "--epochs",
                "1",
                "--fanouts",
                "5,5",
                "--batch-size",
                "256",
                "--cache-ratio",
                "0.3",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "s end to end = " in out and "training epochs" in out and "feature cache" in out


def test_the_summary_and_the_time_account_show_one_figure_for_the_epochs(capsys):
    """The closing lines once read "training epochs 1.1" (the account) and "training epochs 0.9 s" (the sum of
    the epochs' own walls) in one run: the summary now shows the account's figure, the rest as "other"."""
    from graphshard.cli.train import print_metrics

    epoch = {"epoch": 0, "wall_s": 0.9, "wait_s": 0.3, "sample_s": 0.2, "fetch_s": 0.1, "compute_s": 0.5}
    m = {
        "epochs": [epoch | {"comm_s": 0.1}],
        "world_size": 2,
        "num_parts": 2,
        "test_acc": 0.9,
        "val_acc": 0.9,
        "time": {"total_s": 3.0, "epochs_s": 1.1, "startup_s": 1.9},
    }
    print_metrics(m)
    out = capsys.readouterr().out
    assert "+ training epochs 1.1 +" in out, out  # the time account
    assert "training epochs 1.1 s = " in out and "other 0.2;" in out, out  # 1.1 - 0.3 - 0.5 - 0.1


def test_the_command_accounts_from_its_own_start(tmp_path):
    """Run as the ``graphshard`` command, the account starts when the process did: the interpreter's start and
    the imports (``starting the command``) are counted, so the total is the command's wall time but for the
    interpreter's own exit after the summary (torch's and PyG's teardown, about a second here)."""
    import json
    import subprocess
    import sys

    from graphshard import partition_graph

    partition_graph(community_graph(num_nodes=600, seed=3).graph, "g", 2, tmp_path / "parts")
    cmd = [sys.executable, "-m", "graphshard.cli", "train", "--part-config", str(tmp_path / "parts" / "g.json")]
    cmd += ["--num-procs", "2", "--epochs", "1", "--fanouts", "5,5", "--metrics-out", str(tmp_path / "m.json")]
    with open(tmp_path / "out.txt", "w") as out:  # a file, not a pipe: the wait ends with this process, not the
        start = time.perf_counter()  # fork server it leaves behind, which ends after it
        code = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT).wait(timeout=300)
        wall = time.perf_counter() - start
    printed = (tmp_path / "out.txt").read_text()
    assert code == 0, printed
    t = json.loads((tmp_path / "m.json").read_text())["time"]
    assert t["command_s"] > 0.3  # at least the imports of torch
    assert 0.6 * wall < t["total_s"] <= wall, (t, wall)  # without command_s: under half the wall time here
    assert sum(t[k] for k in PHASES if k in t) + t["other_s"] == pytest.approx(t["total_s"])
    assert f"{t['total_s']:.1f} s end to end = starting the command " in printed

"""Live reporting: rank 0 prints each epoch's line when the epoch ends (while the run goes on), the metrics
file holds the history so far after every epoch, and the final file is marked complete."""

from __future__ import annotations

import json
import subprocess
import sys

from graphshard.datasets import community_graph, save_dataset
from graphshard.tasks.report import epoch_line, write_json


def test_epoch_line_shows_loss_validation_and_split():
    e = {
        "epoch": 3,
        "wall_s": 0.321,
        "wait_s": 0.05,
        "sample_s": 0.1,
        "fetch_s": 0.04,
        "compute_s": 0.12,
        "comm_s": 0.02,
        "train_loss": 0.44392,
        "val_acc": 0.97051,
    }
    assert epoch_line(e) == (
        "epoch   3: 0.32 s  loss 0.4439  val acc 0.9705  (sampling 0.1 + fetch 0.0 + compute 0.1 + sync 0.0)"
    )
    assert "waiting 0.1" in epoch_line(dict(e, background=True, wait_s=0.08))
    assert "val MRR 0.5000  AUC 0.9000" in epoch_line({**e, "val_mrr": 0.5, "val_auc": 0.9})


def test_write_json_replaces_atomically(tmp_path):
    write_json(tmp_path / "m.json", {"a": 1})
    write_json(tmp_path / "m.json", {"a": 2})
    assert json.loads((tmp_path / "m.json").read_text()) == {"a": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_epochs_are_reported_while_the_run_goes_on(tmp_path):
    save_dataset(community_graph(num_nodes=2000, noise=8.0, seed=6), tmp_path / "data")
    metrics = tmp_path / "m.json"
    cmd = [
        sys.executable,
        "-m",
        "graphshard.cli",
        "train",
        "--dataset",
        str(tmp_path / "data"),
        "--work-dir",
        str(tmp_path / "work"),
        "--num-procs",
        "2",
        "--epochs",
        "4",
        "--fanouts",
        "5,5",
        "--batch-size",
        "256",
        "--metrics-out",
        str(metrics),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seen = []
    try:
        for line in proc.stdout:
            if line.startswith("epoch "):
                # the line arrives as its epoch ends: the run is still going, the file holds that epoch
                assert proc.poll() is None, line
                partial = json.loads(metrics.read_text())
                assert partial["complete"] is False and len(partial["epochs"]) >= len(seen) + 1
                seen.append(line)
    finally:
        assert proc.wait(timeout=300) == 0
    assert [s.split(":")[0] for s in seen] == [f"epoch {i:>3}" for i in range(4)]
    final = json.loads(metrics.read_text())
    assert final["complete"] is True and len(final["epochs"]) == 4 and "test_acc" in final

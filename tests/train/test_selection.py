"""Model selection (test figures and saved outputs of the best validation epoch, best/ checkpoints),
early stopping, and the live run log (TensorBoard events, metrics.csv)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from graphshard import InputError
from graphshard.datasets import community_graph, save_dataset
from graphshard.tasks.checkpoint import read_state
from graphshard.tasks.loop import best_epoch
from graphshard.tasks.runlog import RunLog, scalars
from graphshard.train import TrainOptions, train

# a noisy graph on which validation accuracy peaks before the last epoch (seeded, so always alike)
KW = dict(fanouts=[4, 4], batch_size=128, lr=0.05, hidden=16, progress=False)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("select")
    save_dataset(community_graph(num_nodes=1500, noise=20.0, seed=8), tmp / "data")
    return tmp


def _run(data, tag, **kw):
    return train(TrainOptions(**KW, **kw), num_procs=2, dataset=str(data / "data"), work_dir=str(data / "work"))


def _cli(data, work: str, ckpt, metrics) -> list[str]:
    """``graphshard train`` on the fixture's dataset (2 ranks), checkpointing to ``ckpt``, without --epochs."""
    return [
        "train",
        "--dataset",
        str(data / "data"),
        "--work-dir",
        str(data / work),
        "--num-procs",
        "2",
        "--checkpoint",
        str(ckpt),
        "--fanouts",
        "4,4",
        "--batch-size",
        "128",
        "--lr",
        "0.05",
        "--hidden",
        "16",
        "--metrics-out",
        str(metrics),
    ]


def test_best_epoch_of_a_hand_computed_history():
    history = [
        {"epoch": 0, "val_acc": 0.5},
        {"epoch": 1, "train_loss": 1.0},
        {"epoch": 2, "val_acc": 0.7},
        {"epoch": 3, "val_acc": 0.7},
        {"epoch": 4, "val_acc": 0.6},
    ]
    assert best_epoch(history, "val_acc") == 2  # the first of equals; epochs without validation skipped
    assert best_epoch(history[1:2], "val_acc") is None
    assert best_epoch([{"epoch": 5, "val_mrr": 0.1}, {"epoch": 6, "val_mrr": 0.3}], "val_mrr") == 6


@pytest.fixture(scope="module")
def long(data):
    """Six epochs without interruption."""
    return _run(data, "long", epochs=6, checkpoint=str(data / "ckpt"), save_embeddings=str(data / "long.npy"))


def test_test_figures_and_outputs_are_those_of_the_best_validation_epoch(data, long):
    vals = [e["val_acc"] for e in long["epochs"]]
    best = vals.index(max(vals))  # computed here from the history, independently of the trainer
    assert best < 5, f"the fixture should peak before the last epoch: {vals}"
    assert (long["best_epoch"], long["val_acc"]) == (best, vals[best])
    assert long["last_epoch"]["epoch"] == 5 and long["last_epoch"]["val_acc"] == vals[5]
    assert read_state(data / "ckpt" / "best" / "rank0")["epoch"] == best
    assert read_state(data / "ckpt" / "rank0")["epoch"] == 5
    # a run that stops at the best epoch has exactly those weights: same test figure, same outputs
    short = _run(data, "short", epochs=best + 1, save_embeddings=str(data / "short.npy"))
    assert [e["val_acc"] for e in short["epochs"]] == vals[: best + 1]
    assert short["test_acc"] == long["test_acc"] and "last_epoch" not in short
    np.testing.assert_array_equal(np.load(data / "long.npy"), np.load(data / "short.npy"))


def test_resuming_is_announced_and_keeps_the_best_epoch(data, long, capfd):
    """Interrupted before the best epoch and resumed to just after it, then resumed again to 6 (from a
    checkpoint past the best epoch): the same selection each time."""
    from graphshard.cli import main

    best = long["best_epoch"]
    assert best >= 1, "the fixture should not peak at its first epoch"
    ckpt = str(data / "resume")
    argv = _cli(data, "work", ckpt, data / "resumed.json")
    assert main([*argv, "--epochs", str(best)]) == 0  # epochs 0 to best - 1
    capfd.readouterr()
    for resumed_after, stop in ((best - 1, best + 1), (best, 6)):  # the best epoch after the resume, then before
        assert main([*argv, "--epochs", str(stop)]) == 0
        out, err = capfd.readouterr()
        assert f"resuming after epoch {resumed_after} from {ckpt}" in err
        assert (
            f"test accuracy {long['test_acc']:.4f} (val {long['val_acc']:.4f}) at epoch {best} (best validation)" in out
        )


def test_patience_stops_when_validation_stops_improving(data):
    m = _run(data, "patience", epochs=30, patience=2)
    vals = [e["val_acc"] for e in m["epochs"]]
    last = len(vals) - 1
    assert last < 29 and m["epochs"][-1].get("stopped_early") is True
    best = vals.index(max(vals))
    assert last - best == 2 and all(v <= vals[best] for v in vals[best:])
    for e in range(last):  # no earlier epoch had waited 2 epochs without improvement
        assert e - vals[: e + 1].index(max(vals[: e + 1])) < 2
    assert m["best_epoch"] == best


def test_log_dir_holds_the_history_as_events_and_csv(data):
    log = data / "log"
    m = _run(data, "log", epochs=3, log_dir=str(log), cache_ratio=0.5, colocated=False)  # cache rows over RPC
    with open(log / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [0, 1, 2]
    for row, e in zip(rows, m["epochs"]):
        assert float(row["loss/train"]) == pytest.approx(e["train_loss"])
        assert float(row["val/acc"]) == pytest.approx(e["val_acc"])
        assert float(row["time/epoch_s"]) == pytest.approx(e["wall_s"])
        assert float(row["cache/hit_rate"]) == pytest.approx(e["cache_hits"] / (e["cache_hits"] + e["cache_misses"]))
    for r in (0, 1):  # every rank's full log (INFO) beside them
        text = (log / f"rank{r}.log").read_text()
        assert f"[rank {r}] INFO graphshard.train.run: run started (rank {r} of 2)" in text and "epoch 2: {" in text
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log))
    events.Reload()
    loss = [(s.step, s.value) for s in events.Scalars("loss/train")]
    assert loss == [(e["epoch"], pytest.approx(e["train_loss"], rel=1e-6)) for e in m["epochs"]]
    assert [s.value for s in events.Scalars("test/acc")] == [pytest.approx(m["test_acc"], rel=1e-6)]
    assert {"val/acc", "lr", "time/fetch_s", "data/fetched_mb", "cache/hit_rate"} <= set(events.Tags()["scalars"])
    # a fresh run in the same directory replaces the earlier run's events (rank logs are appended to)
    _run(data, "log", epochs=2, log_dir=str(log))
    assert len(list(log.glob("events.out.tfevents.*"))) == 1
    assert (log / "rank1.log").read_text().count("run started") == 2


def test_log_dir_is_never_a_users_directory(data, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="refusing to write run-log output into this directory"):
        _run(data, "refused", epochs=1, log_dir=str(tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_csv_alone_without_tensorboard(tmp_path, monkeypatch):
    import graphshard.tasks.runlog as runlog

    monkeypatch.setattr(runlog, "tensorboard_available", lambda: False)
    log = RunLog(str(tmp_path / "log"), start_epoch=0)
    history = [
        {"epoch": 0, "train_loss": 0.9, "lr": 0.01, "wall_s": 2.0, "fetch_bytes": 3e6},
        {"epoch": 1, "train_loss": 0.5, "lr": 0.01, "wall_s": 1.5, "fetch_bytes": 1e6, "val_acc": 0.75},
    ]
    for i in range(2):
        log.epoch(history[i], history[: i + 1])
    log.close({"test/acc": 0.7}, 1)
    assert sorted(p.name for p in (tmp_path / "log").iterdir()) == [".graphshard-output.json", "metrics.csv"]
    rows = list(csv.DictReader(open(tmp_path / "log" / "metrics.csv")))
    assert rows[0]["val/acc"] == "" and float(rows[1]["val/acc"]) == 0.75 and float(rows[0]["data/fetched_mb"]) == 3.0
    assert scalars(history[1])["time/epoch_s"] == 1.5


def test_a_resumed_run_reports_this_runs_epochs_and_its_partitions(data, capfd):
    """``train --dataset`` names the partitions it made (then reused) in a notice and in the metrics file; a
    resumed run's summary accounts for the epochs it trained, not those of the checkpoint; the resume and
    early-stop notices look like the others (``graphshard: ...``), each after the line it follows from."""
    import json
    import re
    from pathlib import Path

    from graphshard.cli import main

    ckpt, metrics = data / "resume-report", data / "resume-report.json"
    argv = _cli(data, "work-report", ckpt, metrics)
    said = (
        r"graphshard: partitions of {}: (\S+) \(({}); give it as --part-config to embed, or to train without "
        r"partitioning again\)"
    )

    def messages(err: str) -> list[str]:
        return [line for line in err.splitlines() if line.strip() and "%|" not in line]  # but progress bars

    assert main([*argv, "--epochs", "2"]) == 0
    out, err = capfd.readouterr()
    first = json.loads(metrics.read_text())
    [line] = messages(err)
    made = re.fullmatch(said.format(re.escape(str(data / "data")), "made now"), line)
    assert made and Path(made.group(1)).resolve() == Path(first["part_config"]) and Path(first["part_config"]).is_file()
    assert first["start_epoch"] == 0 and "training epochs" in out and "resumed" not in out

    assert main([*argv, "--epochs", "30", "--patience", "2"]) == 0
    out, err = capfd.readouterr()
    m = json.loads(metrics.read_text())
    assert m["part_config"] == first["part_config"] and m["start_epoch"] == 2
    vals = [e["val_acc"] for e in m["epochs"]]
    last, best = len(vals) - 1, vals.index(max(vals))
    assert 2 <= last < 29 and last - best == 2  # it did stop early, after the resume
    reused = said.format(re.escape(str(data / "data")), "made by an earlier run, reused")
    lines = messages(err)
    assert len(lines) == 3 and re.fullmatch(reused, lines[0]), lines
    assert lines[1:] == [
        f"graphshard: resuming after epoch 1 from {ckpt}",
        f"graphshard: stopping early after epoch {last}: val_acc has not improved on epoch {best}'s "
        f"{vals[best]:.4f} for 2 epochs (--patience)",
    ]
    # this run printed epochs 2..last, and its summary covers exactly those
    assert [int(x) for x in re.findall(r"^epoch +(\d+):", out, re.M)] == list(range(2, last + 1))
    wall = m["time"]["epochs_s"]  # one figure for this run's epochs, in the account and in the summary
    assert wall >= sum(e["wall_s"] for e in m["epochs"] if e["epoch"] >= 2) - 0.05
    fetched = sum(e["fetch_bytes"] for e in m["epochs"] if e["epoch"] >= 2)
    [summary] = [line for line in out.splitlines() if line.startswith("training epoch")]
    assert summary.startswith(
        f"training epochs 2-{last} (this run; epochs 0-1 resumed from the checkpoint) {wall:.1f} s = "
    ), summary
    near = sum(e["colocated_rows"] for e in m["epochs"] if e["epoch"] >= 2)  # 2 ranks of one host: read in-process
    assert near > 0 and summary.endswith(
        f"; {fetched / 1e6:.1f} MB of features fetched from other ranks, {near / 1e6:.1f} M rows read in-process "
        "from co-located partitions"
    ), summary
    assert f"training epochs {m['time']['epochs_s']:.1f} + " in out  # the time account: this run's too

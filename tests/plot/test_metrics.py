"""plot_metrics: the metrics JSON of ``graphshard train --metrics-out`` as curves and time bars."""

from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from graphshard import InputError
from graphshard.plot import epoch_table, plot_metrics

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def node_metrics(epochs: int = 5) -> dict:
    records = []
    for i in range(epochs):
        rec = {
            "epoch": i,
            "wall_s": 2.0,
            "sample_s": 0.4,
            "fetch_s": 0.3,
            "compute_s": 0.8,
            "comm_s": 0.1,
            "train_loss": 1.5 / (i + 1),
            "fetch_bytes": 1000,
            "batches": 4,
        }
        if i % 2 or i == epochs - 1:
            rec["val_acc"] = 0.5 + 0.05 * i
        records.append(rec)
    return {
        "task": "node",
        "epochs": records,
        "test_acc": 0.7,
        "val_acc": records[-1]["val_acc"],
        "world_size": 2,
        "num_parts": 2,
    }


def link_metrics() -> dict:
    m = node_metrics(3)
    for rec in m["epochs"]:
        if rec.pop("val_acc", None) is not None:
            rec.update(val_mrr=0.3, val_auc=0.8)
    m.update(task="link", test_mrr=0.35, test_auc=0.82)
    return m


@pytest.mark.parametrize("make", [node_metrics, link_metrics])
def test_png_from_dict_and_from_file(tmp_path, make):
    from matplotlib.image import imread

    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(make()))
    for source, out in ((make(), tmp_path / "a.png"), (path, tmp_path / "b.png")):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert plot_metrics(source, out, dpi=40) == out
        assert out.read_bytes().startswith(PNG_MAGIC)
        assert imread(out).shape[:2] == (8 * 40, 11 * 40)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "b.png", "metrics.json"]


def test_epoch_table_columns():
    m = node_metrics(4)
    m["epochs"][1]["sample_s"] = 5.0  # phases overlapping (more than wall time): "other" clips at 0
    cols, _ = epoch_table(m)
    np.testing.assert_allclose(cols["other_s"], [0.4, 0.0, 0.4, 0.4])
    np.testing.assert_array_equal(cols["epoch"], [0, 1, 2, 3])
    assert np.isnan(cols["val_acc"][[0, 2]]).all() and cols["val_acc"][3] == pytest.approx(0.65)
    assert "val_mrr" not in cols


def test_copies_to_a_device_are_a_phase_of_their_own():
    m = node_metrics(3)
    m["epochs"][2]["copy_s"] = 0.25  # a GPU run's epoch; the others (and older files) have none
    cols, _ = epoch_table(m)
    np.testing.assert_allclose(cols["copy_s"], [0.0, 0.0, 0.25])
    np.testing.assert_allclose(cols["other_s"], [0.4, 0.4, 0.15])
    m["epochs"][0]["copy_s"] = -1.0
    with pytest.raises(InputError, match="copy_s"):
        epoch_table(m)


def test_no_validation_and_overwrite(tmp_path):
    m = node_metrics(2)
    for rec in m["epochs"]:
        rec.pop("val_acc", None)
    out = tmp_path / "m.png"
    out.write_bytes(b"old")
    plot_metrics(m, out)
    assert out.read_bytes().startswith(PNG_MAGIC)


def test_missing_key_names_file_and_key(tmp_path):
    m = node_metrics()
    del m["epochs"][2]["fetch_s"]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(m))
    with pytest.raises(InputError, match=r"run\.json: epochs\[2\] has no key 'fetch_s'"):
        plot_metrics(path, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda m: m.pop("epochs"), "key 'epochs' must be a list"),
        (lambda m: m.update(epochs=[]), "key 'epochs' is empty"),
        (lambda m: m["epochs"].__setitem__(0, 3), r"epochs\[0\] must be an object"),
        (lambda m: m["epochs"][1].update(train_loss="low"), r"epochs\[1\]\['train_loss'\] must be a number"),
        (lambda m: m["epochs"][1].update(val_acc=True), r"epochs\[1\]\['val_acc'\] must be a number"),
        (lambda m: m["epochs"][0].update(wall_s=-1.0), r"epochs\[0\]\['wall_s'\] must be a finite number >= 0"),
    ],
)
def test_bad_metrics_dict(tmp_path, change, message):
    m = node_metrics()
    change(m)
    with pytest.raises(InputError, match=message):
        plot_metrics(m, tmp_path / "x.png")


def test_unreadable_files(tmp_path):
    with pytest.raises(InputError, match="nothere.json: no such metrics file"):
        plot_metrics(tmp_path / "nothere.json", tmp_path / "x.png")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="bad.json: not valid JSON"):
        plot_metrics(bad, tmp_path / "x.png")


def test_missing_matplotlib_is_a_clear_error(tmp_path, monkeypatch):
    for name in ("matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(InputError, match=r"plotting needs matplotlib.*graphshard\[plot\]"):
        plot_metrics(node_metrics(), tmp_path / "x.png")

"""``graphshard plot``: a training run's metrics (the JSON ``graphshard train --metrics-out`` writes) as
loss and validation curves and a per-epoch breakdown of where the time went."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..format.jsonfile import read_json_object
from ._figure import hide_axis, integer_ticks, new_figure, save_figure

REQUIRED = ("epoch", "wall_s", "sample_s", "fetch_s", "compute_s", "comm_s", "train_loss")
OPTIONAL = ("copy_s",)  # 0 where a record lacks it (runs without a device copy, older files)
# (key, label, colour) of the time panel's stacked parts; "other" is wall time the rest does not explain
PHASES = (
    ("sample_s", "sampling", "tab:blue"),
    ("fetch_s", "feature fetch", "tab:orange"),
    ("copy_s", "copy to the device", "tab:purple"),
    ("compute_s", "compute", "tab:green"),
    ("comm_s", "gradient sync", "tab:red"),
)


def _float(value) -> float:
    """A metric as a float; NaN for an integer beyond any float (an edited file)."""
    try:
        return float(value)
    except OverflowError:
        return math.nan


def epoch_table(metrics: str | os.PathLike | dict[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The per-epoch columns of a metrics file or dict, and the whole metrics dict.

    Columns: every key of :data:`REQUIRED` (float64, one entry per epoch, ``epoch`` as given), ``other_s``
    (wall time minus the measured phases, clipped at 0) and every ``val_*`` metric (NaN in epochs without
    evaluation). Raises :class:`InputError` naming the file (or ``metrics``) and the key at fault.
    """
    if isinstance(metrics, dict):
        where, data = "metrics", metrics
    else:
        where = str(metrics)
        if not Path(metrics).is_file():
            raise InputError(f"{where}: no such metrics file")
        data = read_json_object(Path(metrics), InputError)
    epochs = data.get("epochs")
    if not isinstance(epochs, list):
        raise InputError(
            f"{where}: key 'epochs' must be a list of per-epoch records, "
            f"got {'nothing' if epochs is None else type(epochs).__name__}"
        )
    if not epochs:
        raise InputError(f"{where}: key 'epochs' is empty: nothing to plot")
    val_keys: list[str] = []
    for i, rec in enumerate(epochs):
        if not isinstance(rec, dict):
            raise InputError(f"{where}: epochs[{i}] must be an object, got {type(rec).__name__}")
        for key in REQUIRED:
            if key not in rec:
                raise InputError(f"{where}: epochs[{i}] has no key {key!r}")
            _number(where, i, key, rec[key])
        for key in OPTIONAL:
            if key in rec:
                _number(where, i, key, rec[key])
        for key, value in rec.items():
            if key.startswith("val_") and value is not None:
                _number(where, i, key, value)
                if key not in val_keys:
                    val_keys.append(key)
    cols = {k: np.array([float(rec[k]) for rec in epochs]) for k in REQUIRED}
    cols.update({k: np.array([float(rec.get(k, 0.0)) for rec in epochs]) for k in OPTIONAL})
    for key in ("epoch",) + tuple(k for k, _, _ in PHASES) + ("wall_s",):
        bad = ~np.isfinite(cols[key]) | (cols[key] < 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"{where}: epochs[{i}][{key!r}] must be a finite number >= 0, got {epochs[i][key]!r}")
    measured = sum(cols[k] for k, _, _ in PHASES)
    cols["other_s"] = np.clip(cols["wall_s"] - measured, 0.0, None)
    for key in val_keys:
        cols[key] = np.array([_float(rec[key]) if rec.get(key) is not None else math.nan for rec in epochs])
    return cols, data


def plot_metrics(metrics: str | os.PathLike | dict[str, Any], out: str | os.PathLike, *, dpi: int = 120) -> Path:
    """Draw a training run's metrics into the image ``out`` (PNG, or the format its suffix names), written
    atomically; returns ``out``. ``metrics``: the JSON file ``graphshard train --metrics-out`` writes, or its
    dict. Raises :class:`InputError` on a bad or missing key, or when matplotlib is not installed."""
    cols, data = epoch_table(metrics)
    fig = new_figure(11, 8)
    grid = fig.add_gridspec(2, 2)
    ax_loss, ax_val, ax_time = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, :])
    x = cols["epoch"]
    ax_loss.plot(x, cols["train_loss"], marker="o", markersize=3)
    ax_loss.set(title="training loss", xlabel="epoch", ylabel="mean loss per mini-batch")
    _validation(ax_val, x, cols, data)
    _time_bars(ax_time, x, cols)
    integer_ticks(ax_loss.xaxis, ax_time.xaxis)
    task = data.get("task", "node")
    where = (
        f" on {data['world_size']} processes x {data['num_parts']} partitions"
        if isinstance(data.get("world_size"), int) and isinstance(data.get("num_parts"), int)
        else ""
    )
    fig.suptitle(f"training run ({task} task){where}: {len(x)} epochs, {cols['wall_s'].sum():.1f} s")
    return save_figure(fig, out, dpi)


# -- internals ---------------------------------------------------------------------------------
def _number(where: str, i: int, key: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: epochs[{i}][{key!r}] must be a number, got {value!r}")


def _validation(ax: Any, x: np.ndarray, cols: dict[str, np.ndarray], data: dict[str, Any]) -> None:
    keys = [k for k in cols if k.startswith("val_")]
    ax.set_title("validation")
    if not keys:
        hide_axis(ax, "no validation metrics")
        return
    for key in keys:
        name = key[len("val_") :]
        seen = np.isfinite(cols[key])
        (line,) = ax.plot(x[seen], cols[key][seen], marker="o", markersize=3, label=f"val {name}")
        test = data.get(f"test_{name}")
        if isinstance(test, (int, float)) and not isinstance(test, bool) and math.isfinite(_float(test)):
            ax.axhline(test, linestyle="--", linewidth=1, color=line.get_color(), label=f"test {name}: {test:.4f}")
    ax.set(xlabel="epoch", ylabel="score")
    integer_ticks(ax.xaxis)
    ax.legend()


def _time_bars(ax: Any, x: np.ndarray, cols: dict[str, np.ndarray]) -> None:
    bottom = np.zeros_like(x)
    for key, label, colour in PHASES + (("other_s", "other", "0.6"),):
        ax.bar(x, cols[key], bottom=bottom, label=label, color=colour, width=0.8)
        bottom = bottom + cols[key]
    ax.hlines(cols["wall_s"], x - 0.4, x + 0.4, colors="black", linewidth=2, label="wall time")
    ax.set(title="where each epoch's time went (mean over ranks)", xlabel="epoch", ylabel="seconds")
    ax.legend(ncols=6, loc="upper center", bbox_to_anchor=(0.5, -0.15), frameon=False)

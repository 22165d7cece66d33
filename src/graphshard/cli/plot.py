"""``plot``: draw a training run's metrics file (loss and validation curves, where each epoch's time went)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import command, out_flag


def run_plot(args: argparse.Namespace) -> None:
    from ..plot import plot_metrics

    print(f"wrote {plot_metrics(Path(args.metrics), Path(args.out))}")


def register(sub: Any) -> None:
    p = command(
        sub,
        "plot",
        "draw a training run's metrics: loss and validation per epoch, time split per epoch",
        "Draw the metrics JSON written by 'graphshard train --metrics-out' into a PNG (needs matplotlib: "
        "pip install graphshard[plot]).",
    )
    p.add_argument("metrics", help="metrics JSON from 'graphshard train --metrics-out'")
    out_flag(p, "PNG file to write")
    p.set_defaults(func=run_plot)

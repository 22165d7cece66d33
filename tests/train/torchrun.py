"""Run ``graphshard train`` under torchrun (2 local processes) and return its metrics JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def torchrun_train(args: list[str], metrics: Path) -> dict:
    torchrun = Path(sys.executable).with_name("torchrun")
    cmd = [
        str(torchrun),
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "graphshard.cli",
        "train",
        *args,
        "--timeout",
        "120",
        "--metrics-out",
        str(metrics),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(metrics.read_text())

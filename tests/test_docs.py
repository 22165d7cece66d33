"""The examples of the docs run as written: docs/dataset.md's Python block builds a dataset and its shell
block's commands partition it; docs/models.md's Python block is a module of model factories and its shell
block trains and embeds them (``python X.py`` and ``graphshard ...`` lines, in order, in one directory)."""

from __future__ import annotations

import glob
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _run_page(page: str, tmp_path: Path) -> tuple[list[list[str]], list[str]]:
    """Write the page's Python blocks (each named by its ``# NAME.py`` first line) into ``tmp_path`` and run
    its shell lines there, in order (globs expanded, as a shell would); returns the commands and their stderr."""
    text = (DOCS / page).read_text()
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        name = re.match(r"# (\w+\.py)", block)
        assert name, f"docs/{page} Python block without a '# NAME.py' first line:\n{block[:200]}"
        (tmp_path / name.group(1)).write_text(block)
    commands = [line.split() for block in re.findall(r"```bash\n(.*?)```", text, re.S) for line in block.splitlines()
                if line.strip()]
    errors = []
    for argv in commands:
        args = [a for arg in argv[1:] for a in (sorted(glob.glob(arg, root_dir=tmp_path)) or [arg])]
        run = [sys.executable, *args] if argv[0] == "python" else [sys.executable, "-m", "graphshard.cli", *args]
        done = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{' '.join(argv)}:\n{done.stderr[-3000:]}"
        errors.append(done.stderr)
    return commands, errors


def test_dataset_page_example_runs_as_written(tmp_path):
    commands, _ = _run_page("dataset.md", tmp_path)
    assert [c[0] for c in commands] == ["python", "graphshard"]
    config = json.loads((tmp_path / "parts" / "tiny" / "tiny.json").read_text())
    assert config["num_parts"] == 2 and config["num_nodes"] == 100 and config["num_edges"] == 200
    assert config["num_classes"] == 4


def test_models_page_example_runs_as_written(tmp_path):
    commands, errors = _run_page("models.md", tmp_path)
    assert [c[:2] for c in commands] == [["graphshard", "generate"], ["graphshard", "train"], ["graphshard", "embed"],
                                         ["graphshard", "train"]]
    sage, skip = (json.loads((tmp_path / f"{m}.json").read_text()) for m in ("sage", "skip"))
    assert sage["test_acc"] > 0.5 and skip["test_acc"] > 0.5, (sage["test_acc"], skip["test_acc"])  # 4 classes
    assert np.load(tmp_path / "emb.npy").shape == (2000, 4)
    assert "my_models:skip offers no layer-wise inference" in errors[3] and "layer-wise" not in errors[1]

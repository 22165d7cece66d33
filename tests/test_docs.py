"""The example of docs/dataset.md runs as written: its Python block builds the dataset, its shell block's
commands partition it (``python X.py`` and ``graphshard ...`` lines, in order, in one directory)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "dataset.md"


def test_dataset_page_example_runs_as_written(tmp_path):
    text = DOC.read_text()
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        name = re.match(r"# (\w+\.py)", block)
        assert name, f"docs/dataset.md Python block without a '# NAME.py' first line:\n{block[:200]}"
        (tmp_path / name.group(1)).write_text(block)
    commands = [line.split() for block in re.findall(r"```bash\n(.*?)```", text, re.S) for line in block.splitlines()
                if line.strip()]
    assert [c[0] for c in commands] == ["python", "graphshard"]
    for argv in commands:
        run = [sys.executable, *argv[1:]] if argv[0] == "python" else [sys.executable, "-m", "graphshard.cli", *argv[1:]]
        done = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{' '.join(argv)}:\n{done.stderr[-3000:]}"
    config = json.loads((tmp_path / "parts" / "tiny" / "tiny.json").read_text())
    assert config["num_parts"] == 2 and config["num_nodes"] == 100 and config["num_edges"] == 200
    assert config["num_classes"] == 4

"""The command line stays light: reading the commands and the training options imports none of PyG
(about 2 s and 100+ MB in every process, every rank of `dispatch` included, which never trains)."""

from __future__ import annotations

import subprocess
import sys


def test_the_command_line_and_the_options_import_no_pyg():
    code = (
        "import sys, graphshard.cli, graphshard.tasks.options, graphshard.models.registry\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch_geometric'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout[:500]

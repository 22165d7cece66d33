"""Processes a script starts without an ``if __name__ == "__main__":`` guard: spawned children re-import the
script and would start everything again; they stop at once and the error says how to fix the script."""

from __future__ import annotations

import subprocess
import sys
import time

from graphshard import partition_graph
from tests.graphs import small_homo

GUARD = 'if __name__ == "__main__":'


def _run(argv: list[str], cwd) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=cwd)
    return done, time.monotonic() - start


def test_launch_at_a_scripts_top_level_fails_at_once(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(
        "import graphshard as gs\n\ndef work():\n    print('ran')\n\ngs.distributed.launch(work, 2, timeout=120)\n"
    )
    done, seconds = _run([sys.executable, str(script)], tmp_path)
    assert done.returncode != 0
    assert GUARD in done.stderr and "rank" in done.stderr and str(script) in done.stderr, done.stderr[-2000:]
    assert seconds < 60  # not the 120 s timeout


def test_sampler_workers_of_an_unguarded_launch_script_fail_at_once(tmp_path):
    """``graphshard launch`` runs the script as ``__main__`` in every rank (so its top level is the rank's job),
    but the rank's sampler workers import it again: without the guard they would join the run themselves."""
    partition_graph(small_homo(), "s", 2, tmp_path / "parts", part_method="random")
    script = tmp_path / "job.py"
    script.write_text(
        "import torch\n"
        "from graphshard.distributed import DistGraph, DistNeighborLoader, node_split, session\n"
        "with session(timeout=120) as s:\n"
        f"    g = DistGraph('s', {str(tmp_path / 'parts' / 's.json')!r})\n"
        "    seeds = node_split(torch.ones(g.num_nodes(), dtype=torch.bool), g.get_partition_book(),\n"
        "                       rank=s.rank, world_size=s.world_size)\n"
        "    with DistNeighborLoader(g, [2], seeds, batch_size=8, num_workers=1) as loader:\n"
        "        next(iter(loader))\n"
    )
    done, seconds = _run(
        [sys.executable, "-m", "graphshard.cli", "launch", "--num-procs", "2", "--timeout", "120", str(script)],
        tmp_path,
    )
    assert done.returncode == 2
    assert "sampler worker 0" in done.stderr and GUARD in done.stderr, done.stderr[-2000:]
    assert seconds < 90


def test_the_guard_fixes_it(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(
        "import graphshard as gs\n\ndef work():\n    print('ran')\n\n"
        f"{GUARD}\n    gs.distributed.launch(work, 2, timeout=120)\n"
    )
    done, _ = _run([sys.executable, str(script)], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("ran") == 2

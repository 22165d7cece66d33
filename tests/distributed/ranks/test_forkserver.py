"""Ranks forked from the fork server (``graphshard.distributed.ranks.forkserver``): one server for every launch of a
process, and each rank sees the launcher as it is when it launches (environment, working directory, standard
output), not as it was when the server started."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from graphshard.distributed.ranks.forkserver import stop_server
from graphshard.distributed.ranks.launcher import launch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux's")


def _report(out: str) -> None:
    rank = os.environ["RANK"]
    seen = {"ppid": os.getppid(), "mark": os.environ.get("GRAPHSHARD_TEST_MARK"), "cwd": os.getcwd()}
    Path(out, f"rank{rank}.json").write_text(json.dumps(seen))
    if seen["mark"] == "two":
        # the whole line in one write: the two ranks print at once to one file, and a newline written apart
        # from its line can land after the other rank's line (seen once in CI)
        print(f"rank {rank} of launch two\n", end="", flush=True)


def test_every_launch_forks_from_one_server_and_sees_the_launcher_as_it_is_now(tmp_path, monkeypatch, capfd):
    seen = []
    for mark in ("one", "two"):
        here = tmp_path / mark
        here.mkdir()
        monkeypatch.chdir(here)
        monkeypatch.setenv("GRAPHSHARD_TEST_MARK", mark)
        if mark == "one":  # the server may start now, with the standard output of before the capture
            with capfd.disabled():
                launch(_report, 2, (str(here),))
        else:
            launch(_report, 2, (str(here),))
        ranks = [json.loads((here / f"rank{r}.json").read_text()) for r in range(2)]
        assert {r["mark"] for r in ranks} == {mark}  # the environment set since the server started
        assert {r["cwd"] for r in ranks} == {str(here)}
        out = capfd.readouterr().out  # what the ranks print goes where this process's output goes now
        printed = sorted(line for line in out.splitlines() if line.startswith("rank "))
        assert printed == ([] if mark == "one" else ["rank 0 of launch two", "rank 1 of launch two"])
        seen += ranks
    parents = {r["ppid"] for r in seen}
    assert len(parents) == 1 and os.getpid() not in parents  # forked by one server, which imported once


def test_a_launch_after_the_server_was_stopped_starts_another(tmp_path):
    """A signal while the ranks start stops the server (it may be importing for seconds); a later launch in the
    same process (a notebook after Ctrl-C) gets a new server, whose ranks run."""
    parents = []
    for mark in ("before", "after"):
        here = tmp_path / mark
        here.mkdir()
        launch(_report, 2, (str(here),))
        parents.append({json.loads((here / f"rank{r}.json").read_text())["ppid"] for r in range(2)})
        stop_server()
    assert all(len(p) == 1 for p in parents) and parents[0] != parents[1], parents

"""What an interrupted ``embed`` says about its output (the end-to-end interrupts are in
tests/distributed/ranks/test_interrupt.py; this is the case they meet only when a signal lands during the rename)."""

from __future__ import annotations

import argparse

import numpy as np

from graphshard.cli.infer import _stamp, interrupted_line


def test_the_line_says_whether_this_run_put_its_output_in_place(tmp_path):
    out = tmp_path / "emb.npy"
    args = argparse.Namespace(out=str(out))
    assert interrupted_line(args) == f"interrupted; run the same command again to write {out}"  # before it started
    args.out_before = _stamp(str(out))
    assert interrupted_line(args) == f"interrupted; run the same command again to write {out}"  # nothing written
    np.save(out, np.zeros(3))  # an older output the user keeps
    args.out_before = _stamp(str(out))
    assert interrupted_line(args) == f"interrupted; run the same command again to write {out}"
    tmp = tmp_path / ".emb.npy.tmp.npy"
    np.save(tmp, np.ones(3))
    tmp.replace(out)  # this run's output, renamed into place as embed does
    assert interrupted_line(args) == f"interrupted after writing {out} (complete)"

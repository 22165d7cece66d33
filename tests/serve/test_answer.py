"""The precomputed embeddings ``graphshard serve`` answers from: a damaged or wrong file is an error naming it."""

from __future__ import annotations

import numpy as np
import pytest

from graphshard.errors import FormatError
from graphshard.serve.answer import open_stale


def test_embeddings_are_read_and_a_damaged_or_wrong_file_is_named(tmp_path):
    good = tmp_path / "good.npy"
    np.save(good, np.arange(12, dtype=np.float32).reshape(3, 4))
    got = open_stale(good, ["paper"], {"paper": 3}, 4)
    assert got["paper"].tolist() == np.arange(12, dtype=np.float32).reshape(3, 4).tolist()
    bad = tmp_path / "bad.npy"  # an unclosed bracket in the header: tokenize.TokenError from np.load itself
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4"
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    bad.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header)
    with pytest.raises(FormatError, match=f"{bad}: not a .npy file"):
        open_stale(bad, ["paper"], {"paper": 3}, 4)
    with pytest.raises(FormatError, match="expected float32 rows \\(3, 5\\)"):
        open_stale(good, ["paper"], {"paper": 3}, 5)
    with pytest.raises(FormatError, match="missing"):
        open_stale(tmp_path / "none.npy", ["paper"], {"paper": 3}, 4)

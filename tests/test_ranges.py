"""The compiled range look-up against NumPy's ``searchsorted``: empty ranges, range edges, many ranges (the
NumPy path), and IDs out of range named as the range check names them."""

from __future__ import annotations

import numpy as np
import pytest

from graphshard.errors import IDRangeError
from graphshard.ranges import COUNTED_UP_TO, locate


@pytest.mark.parametrize("num_ranges", [1, 2, 5, COUNTED_UP_TO, COUNTED_UP_TO + 3])
def test_locate_matches_searchsorted(num_ranges):
    rng = np.random.default_rng(num_ranges)
    sizes = rng.integers(1, 40, num_ranges)
    if num_ranges > 1:
        sizes[rng.integers(1, num_ranges)] = 0  # an empty range (a partition without nodes of a type)
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    upper = int(bounds[-1])
    ids = np.concatenate([rng.integers(0, upper, 500), bounds[:-1][bounds[:-1] < upper], [upper - 1]]).astype(np.int64)
    got = locate(ids, bounds, "node ID")
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.searchsorted(bounds, ids, side="right") - 1)
    assert ((bounds[got] <= ids) & (ids < bounds[got + 1])).all()  # the defining property, checked directly
    assert locate(ids[:0], bounds, "node ID").shape == (0,)


@pytest.mark.parametrize("bad", [-1, 100, 10**12])
def test_locate_names_the_first_id_out_of_range(bad):
    bounds = np.array([0, 40, 40, 100], dtype=np.int64)
    ids = np.array([3, 99, bad, 5, bad], dtype=np.int64)
    with pytest.raises(IDRangeError, match=rf"node ID {bad} is out of range \[0, 100\) \(2 such IDs\)"):
        locate(ids, bounds, "node ID")

"""CSR node features against their dense matrix: row selection, dense reads, the non-zeros sent to other
processes, and the checks applied to stored tensors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphshard.errors import FormatError
from graphshard.sparse import densify, from_tensors
from tests.graphs import sparse_hetero


def _csr():
    return sparse_hetero().node_feats["paper"]["bow"]


def test_rows_match_the_dense_matrix():
    x = _csr()
    dense = x.dense()
    assert dense.shape == (60, 50) and np.count_nonzero(dense) == x.indices.shape[0]
    ids = np.array([59, 0, 7, 7, 31])
    assert np.array_equal(x.take(ids).dense(), dense[ids])
    assert (
        np.array_equal(x[ids], dense[ids])
        and np.array_equal(x[3:40:5], dense[3:40:5])
        and np.array_equal(x[8], dense[8])
    )
    assert np.array_equal(x.read(torch.from_numpy(ids)).numpy(), dense[ids])
    counts, cols, vals = x.nonzeros(ids)
    assert counts.sum() == cols.shape[0] < ids.shape[0] * 50
    assert np.array_equal(densify(counts, cols, vals, 50).numpy(), dense[ids])


@pytest.mark.parametrize(
    "damage, what",
    [("indices", "column beyond the width"), ("indptr", "decreasing indptr"), ("data", "a value missing")],
)
def test_damaged_tensors_are_refused_naming_the_file(damage, what):
    x = _csr()
    tensors = {k: v.copy() for k, v in x.tensors("paper/bow").items()}
    if damage == "indices":
        tensors["paper/bow/indices"][3] = 50
    elif damage == "indptr":
        tensors["paper/bow/indptr"][10] = tensors["paper/bow/indptr"][12] + 1
    else:
        tensors["paper/bow/data"] = tensors["paper/bow/data"][:-1]
    with pytest.raises(FormatError, match=r"feats\.safetensors: sparse feature 'paper/bow' is not a valid CSR"):
        from_tensors(tensors, "paper/bow", 50, "part0/node_feats.safetensors")
    assert from_tensors(x.tensors("paper/bow"), "paper/bow", 50, "f").shape == (60, 50)


def test_rows_across_stored_partitions_served_as_one():
    """A process serving several stored partitions reads a CSR feature's rows across them, dense or as
    non-zeros, in the order asked."""
    from graphshard.distributed.stores.partitions import Stacked

    x = _csr()
    dense = x.dense()
    stacked = Stacked([x.take(np.arange(0, 23)), x.take(np.arange(23, 41)), x.take(np.arange(41, 60))])
    rows = np.array([59, 3, 23, 40, 41, 0, 22, 30])
    assert np.array_equal(stacked.read(torch.from_numpy(rows)).numpy(), dense[rows])
    assert np.array_equal(densify(*stacked.nonzeros(rows), 50).numpy(), dense[rows])

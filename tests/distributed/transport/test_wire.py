"""How feature rows travel: as stored, or on request compact — floats as 16-bit floats, integers in the
narrowest type that holds them (exactly); on 2 ranks, remote rows arrive equal to the stored ones (to
half precision with float16/bfloat16) in fewer bytes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphshard import partition_graph
from graphshard.distributed.ranks.launcher import launch
from graphshard.distributed.transport.wire import pack, unpack
from graphshard.errors import InputError
from graphshard.graph import Graph


@pytest.mark.parametrize(
    "values, sent",
    [
        ([-128, 0, 127], torch.int8),
        ([-5, 300], torch.int16),
        ([0, 2**31 - 1], torch.int32),
        ([0, 2**40], torch.int64),
        ([], torch.int64),
    ],
)
def test_integers_travel_in_the_narrowest_type_that_holds_them(values, sent):
    rows = torch.tensor(values, dtype=torch.int64)
    assert pack(rows, "stored") is rows
    packed = pack(rows, "float16")
    assert packed.dtype == sent
    assert torch.equal(unpack(packed, torch.int64), rows) and unpack(packed, torch.int64).dtype == torch.int64


@pytest.mark.parametrize(
    "wire, sent, tol",
    [("stored", torch.float32, 0.0), ("float16", torch.float16, 2**-11), ("bfloat16", torch.bfloat16, 2**-8)],
)
def test_floats_travel_as_asked(wire, sent, tol):
    rows = torch.randn(50, 7, generator=torch.Generator().manual_seed(0))
    packed = pack(rows, wire)
    assert packed.dtype == sent
    back = unpack(packed, torch.float32)
    assert back.dtype == torch.float32
    assert torch.allclose(back, rows, rtol=tol, atol=0) if tol else torch.equal(back, rows)
    assert pack(rows.half(), "bfloat16").dtype == torch.float16  # never widened nor converted between halves
    assert pack(torch.ones(3, dtype=torch.bool), "float16").dtype == torch.bool


def test_float16_refuses_rows_beyond_its_range():
    """A finite value beyond 65504 would arrive as inf and the run would stop on a NaN loss blamed on --lr:
    refused naming the feature, the largest magnitude and bfloat16; an inf stored as such travels as is."""
    rows = torch.tensor([[1.0, -2.5e6], [3.0, 4.0]])
    with pytest.raises(InputError, match=r"feature 'paper/feat' holds values up to 2\.5e\+06.*bfloat16"):
        pack(rows, "float16", name="paper/feat")
    carried = unpack(pack(rows, "bfloat16"), torch.float32)  # float32's range, 8 bits of precision
    assert torch.allclose(carried, rows, rtol=2**-8, atol=0)
    fine = torch.tensor([[65504.0, float("inf")], [-1.0, 0.5]])
    assert torch.equal(unpack(pack(fine, "float16", name="x"), torch.float32), fine)


def test_an_unknown_wire_type_is_refused():
    from graphshard.distributed.loaders.batch import BatchSpec

    with pytest.raises(InputError, match="wire dtype 'int4'.*stored, float16, bfloat16"):
        BatchSpec([5], wire_dtype="int4")


def _graph() -> Graph:
    rng = np.random.default_rng(0)
    n = 400
    src, dst = rng.integers(0, n, 3000), rng.integers(0, n, 3000)
    feats = {
        "feat": rng.standard_normal((n, 16)).astype(np.float32),
        "label": rng.integers(0, 5, n),
        "big": rng.integers(-(2**40), 2**40, n),
        "huge": np.full((n, 2), 1.0e6, dtype=np.float32),
    }
    return Graph({"_N": n}, {("_N", "_E", "_N"): (src, dst)}, {"_N": feats})


def _worker(config: str) -> None:
    from graphshard.distributed.runtime.graph import DistGraph
    from graphshard.distributed.runtime.session import session

    g = _graph()
    with session(timeout=60):
        dg = DistGraph("w", config, colocated=False)  # the other partition comes over RPC
        book, store = dg.get_partition_book(), dg.features
        ids = torch.arange(g.num_nodes["_N"])
        orig = book.to_original("_N", ids).numpy()
        remote = int((book.nid2partid(ids) != dg.part_id).sum())
        assert remote > 0
        for name, wire, row_bytes, tol in (
            ("feat", "stored", 64, 0),
            ("feat", "float16", 32, 2**-11),
            ("feat", "bfloat16", 32, 2**-8),
            ("label", "float16", 1, 0),
            ("big", "stored", 8, 0),
        ):
            before = store.stats["bytes_received"]
            got = store.lookup(None, name, ids, wire)
            want = torch.from_numpy(g.node_feats["_N"][name][orig])
            assert got.dtype == want.dtype
            assert torch.allclose(got, want, rtol=tol, atol=0) if tol else torch.equal(got, want), (name, wire)
            assert store.stats["bytes_received"] - before == remote * row_bytes, (name, wire)
        with pytest.raises(Exception, match=r"'_N/huge' holds values up to 1e\+06.*bfloat16"):
            store.lookup(None, "huge", ids, "float16")  # its remote rows cannot travel as float16


def test_remote_rows_arrive_as_stored_in_fewer_bytes(tmp_path):
    partition_graph(_graph(), "w", 2, tmp_path, part_method="metis")
    launch(_worker, 2, (str(tmp_path / "w.json"),), timeout=120)

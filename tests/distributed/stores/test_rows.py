"""Feature rows gathered and placed: ``gather_rows`` writes ``tensor[rows]`` to ``out[at]`` and nothing else, for
every dtype (bfloat16, which NumPy lacks, included), any row shape, memory-mapped tensors and empty reads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphshard.distributed.stores.rows import gather_rows, put_rows, take_rows


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.bool]
)
@pytest.mark.parametrize("row_shape", [(), (1,), (7,), (3, 4)])
def test_gather_rows_places_exactly_the_rows_asked(dtype, row_shape):
    gen = torch.Generator().manual_seed(0)
    tensor = (torch.randn((50, *row_shape), generator=gen) * 10).to(dtype)
    rows = np.array([3, 49, 0, 3, 17], dtype=np.int64)  # a row read twice is placed twice
    at = np.array([8, 1, 4, 0, 6], dtype=np.int64)
    out = torch.full((10, *row_shape), 7).to(dtype)
    gather_rows(out, at, tensor, rows)
    expected = torch.full((10, *row_shape), 7).to(dtype)
    expected[torch.from_numpy(at)] = tensor[torch.from_numpy(rows)]  # torch's own indexing as the reference
    assert torch.equal(out, expected)
    put = torch.full((10, *row_shape), 7).to(dtype)
    put_rows(put, torch.from_numpy(at), take_rows(tensor, torch.from_numpy(rows)))
    assert torch.equal(put, expected)


@pytest.mark.parametrize("row_shape", [(0,), (1,), (32,), (3, 5)])
def test_gather_rows_of_a_long_read_past_its_prefetch_window(row_shape):
    """Many more rows than the kernel asks the cache for ahead (rows.AHEAD), with the last rows of the table
    among them: the hint ahead changes nothing placed, whatever the row's width (none included)."""
    rng = np.random.default_rng(5)
    tensor = torch.from_numpy(rng.standard_normal((400, *row_shape)).astype(np.float32))
    rows = np.concatenate([rng.integers(0, 400, 300), [399, 398, 0]]).astype(np.int64)
    at = rng.permutation(500)[: rows.shape[0]].astype(np.int64)
    out = torch.full((500, *row_shape), -1.0)
    gather_rows(out, at, tensor, rows)
    expected = torch.full((500, *row_shape), -1.0)
    expected[torch.from_numpy(at)] = tensor[torch.from_numpy(rows)]
    assert torch.equal(out, expected)
    put = torch.full((500, *row_shape), -1.0)
    put_rows(put, torch.from_numpy(at), tensor[torch.from_numpy(rows)])
    assert torch.equal(put, expected)


def test_gather_rows_reads_a_memory_mapped_tensor_and_nothing(tmp_path):
    data = np.arange(60, dtype=np.float32).reshape(20, 3)
    data.tofile(tmp_path / "t.bin")
    mapped = torch.from_file(str(tmp_path / "t.bin"), shared=False, size=60, dtype=torch.float32).view(20, 3)  # mmap
    out = torch.zeros(4, 3)
    gather_rows(out, np.array([2, 0]), mapped, np.array([19, 5]))
    assert torch.equal(out, torch.tensor([[15.0, 16, 17], [0, 0, 0], [57, 58, 59], [0, 0, 0]]))
    gather_rows(out, np.empty(0, dtype=np.int64), mapped, np.empty(0, dtype=np.int64))
    assert out.sum() == 15 + 16 + 17 + 57 + 58 + 59

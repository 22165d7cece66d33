"""Batch buffers: the tensor asked for (any dtype, on a cache line, writable), and memory that comes back for the
next batch instead of being faulted in again page by page."""

from __future__ import annotations

import threading

import pytest
import torch

from graphshard.distributed.buffers import LINE, empty


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int8, torch.bool])
@pytest.mark.parametrize("shape", [(5, 3), (0, 4), (7,), (2, 3, 4), ()])
def test_a_buffer_is_the_tensor_asked_for(dtype, shape):
    t = empty(shape, dtype)
    assert t.shape == shape and t.dtype == dtype and t.is_contiguous()
    assert t.data_ptr() % LINE == 0
    t.copy_(torch.ones(shape).to(dtype))
    assert torch.equal(t, torch.ones(shape).to(dtype))


def test_a_negative_dimension_is_refused():
    with pytest.raises(ValueError):
        empty((3, -1), torch.float32)


def _faults() -> int:
    with open("/proc/thread-self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])  # minflt: minor page faults of this thread


@pytest.mark.skipif(not hasattr(threading, "get_native_id"), reason="Linux page-fault counts")
def test_a_freed_buffer_is_used_again_without_faulting_its_pages_in():
    """As a loader's builder thread does: a 16 MB buffer per batch, filled, then dropped. Once the allocator has
    settled (a few batches), filling the next one faults in under a tenth of its 4 KB pages."""
    faults = []

    def batches() -> None:
        for _ in range(6):
            before = _faults()
            buf = empty((32_768, 128), torch.float32)  # 16 MB
            buf.fill_(1.0)
            faults.append(_faults() - before)
            del buf

    builder = threading.Thread(target=batches)
    builder.start()
    builder.join(60)
    pages = 32_768 * 128 * 4 // 4096
    assert max(faults[-2:]) < pages // 10, faults  # torch's own allocator: about half the pages, every time

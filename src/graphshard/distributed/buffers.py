"""Uninitialised tensors for what a rank builds and receives per batch (rows gathered, answers read off a
socket), from NumPy's allocator.

torch's allocator hands a large tensor's pages back to the system when it is freed, so every batch's buffers
were faulted in again, page by page. A 23 MB tensor (a batch's 45,000 rows of 128 float32) made and filled 60
times in a thread: 5,600 page faults and 11-12 ms each from torch's allocator; from NumPy's, which keeps freed
memory for the next request, none and 0.05 ms.
"""

from __future__ import annotations

import math

import numpy as np
import torch

# Where a buffer's memory starts: on a cache line, as torch's allocator gives (rows of whole lines then lie on lines).
LINE = 64


def empty(shape: tuple[int, ...] | list[int], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised contiguous tensor of ``shape`` and ``dtype`` (any, bfloat16 included) starting on a
    cache line, in memory NumPy allocated (the tensor keeps it alive)."""
    shape = tuple(shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"a tensor of shape {shape}")
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    buf = np.empty(nbytes + LINE, dtype=np.uint8)
    skip = -buf.ctypes.data % LINE
    return torch.from_numpy(buf[skip : skip + nbytes]).view(dtype).view(shape)

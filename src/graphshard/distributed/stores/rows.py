"""Gathering and placing whole feature rows: gathering through NumPy where the dtype has a NumPy type, placing
in a compiled pass, and both in one compiled pass where rows go straight from a stored tensor into a batch's rows.

NumPy's ``take`` and fancy assignment of whole rows were 1.2-2.2 x faster than torch's ``index_select`` and
``index_copy_`` on this machine's CPU (25,000 random rows of 32 and 128 float32 columns: take 0.12 / 0.87 ms
against 0.27 / 1.02 ms; place 0.19 / 1.01 ms against 0.33 / 1.70 ms). bfloat16, which NumPy lacks, is taken
by torch's ``index_select``. Reading rows into their places in a batch (:func:`gather_rows`) in one compiled pass
saves NumPy's intermediate copy: 25,000 random rows of 32 float32 columns into 50,000, 1.1-1.3 ms against
1.5-1.8 ms for take then place.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ...jit import kernel, prefetch

# Rows a gather asks the cache for ahead of copying them (rows read at random miss the cache; with the hint the
# misses overlap). 38,000 random rows of 128 bytes from a 64 MB table into a new batch, 300 rounds alternated on
# one core: medians 1.52 ms without, 1.09 ms 8 rows ahead, 1.02 ms 16 ahead (0.67 x per pair).
AHEAD = 16


def take_rows(tensor: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``tensor[rows]`` (rows along the first dimension; ``tensor`` may be memory-mapped)."""
    if tensor.dtype == torch.bfloat16:
        return torch.index_select(tensor, 0, rows)
    return torch.from_numpy(np.take(tensor.numpy(), rows.numpy(), axis=0))


def put_rows(out: torch.Tensor, at: torch.Tensor, rows: torch.Tensor) -> None:
    """``out[at] = rows`` in place (``rows`` of ``out``'s dtype; ``out`` contiguous), copied as bytes in one
    compiled pass: NumPy's row assignment costs about twice as much (7,000 rows of 128 bytes placed among 50,000,
    300 alternated rounds on one core: 0.33 ms against 0.18 ms; rows of 512 bytes 1.14 against 0.73 ms)."""
    if math.prod(out.shape[1:]) == 0 or not at.numel():
        return
    _place(_row_bytes(out), at.numpy(), _row_bytes(rows.contiguous()))


@kernel()
def _place(out, at, src):
    width = src.shape[1]
    for i in range(at.size):
        a = at[i]
        for j in range(width):
            out[a, j] = src[i, j]


@kernel()
def _gather(out, at, src, rows):
    width = src.shape[1]
    for i in range(rows.size):
        if i + AHEAD < rows.size:  # the first and last byte of a row AHEAD rows on
            ahead = src[rows[i + AHEAD]]
            prefetch(ahead, 0)
            prefetch(ahead, width - 1)
        a, r = at[i], rows[i]
        for j in range(width):
            out[a, j] = src[r, j]


def gather_rows(out: torch.Tensor, at: np.ndarray, tensor: torch.Tensor, rows: np.ndarray) -> None:
    """``out[at] = tensor[rows]`` in place, in one pass, for any dtype (rows are copied as bytes; ``out``
    contiguous, of ``tensor``'s dtype; ``tensor`` may be memory-mapped)."""
    if math.prod(out.shape[1:]) == 0:
        return  # rows of no entries: nothing to copy (and no byte view of them)
    if not tensor.is_contiguous():
        put_rows(out, torch.from_numpy(at), take_rows(tensor, torch.from_numpy(rows)))
        return
    _gather(_row_bytes(out), at, _row_bytes(tensor), rows)


def _row_bytes(t: torch.Tensor) -> np.ndarray:
    return t.reshape(t.shape[0], -1).view(torch.uint8).numpy()


def warm_up() -> None:
    """Compile :func:`gather_rows`' and :func:`put_rows`' kernels (one each, for every dtype) or load them from the
    cache, so ranks started afterwards load them instead of each compiling them."""
    gather_rows(torch.zeros(1), np.zeros(1, dtype=np.int64), torch.ones(1), np.zeros(1, dtype=np.int64))
    put_rows(torch.zeros(1), torch.zeros(1, dtype=torch.int64), torch.ones(1))

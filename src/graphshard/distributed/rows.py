"""Gathering and placing whole feature rows, through NumPy where the dtype has a NumPy type.

NumPy's ``take`` and fancy assignment of whole rows were 1.2-2.2 x faster than torch's ``index_select`` and
``index_copy_`` on this machine's CPU (25,000 random rows of 32 and 128 float32 columns: take 0.12 / 0.87 ms
against 0.27 / 1.02 ms; place 0.19 / 1.01 ms against 0.33 / 1.70 ms). bfloat16, which NumPy lacks, keeps
torch's operations.
"""

from __future__ import annotations

import numpy as np
import torch


def take_rows(tensor: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``tensor[rows]`` (rows along the first dimension; ``tensor`` may be memory-mapped)."""
    if tensor.dtype == torch.bfloat16:
        return torch.index_select(tensor, 0, rows)
    return torch.from_numpy(np.take(tensor.numpy(), rows.numpy(), axis=0))


def put_rows(out: torch.Tensor, at: torch.Tensor, rows: torch.Tensor) -> None:
    """``out[at] = rows`` in place (``rows`` of ``out``'s dtype; ``out`` contiguous)."""
    if out.dtype == torch.bfloat16:
        out.index_copy_(0, at, rows)
    else:
        out.numpy()[at.numpy()] = rows.numpy()

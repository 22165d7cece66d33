"""ReLU then dropout, fused: one compiled pass draws the mask, applies both and keeps what the backward pass
needs.

``F.dropout(F.relu(x))`` on the CPU costs three passes and a Bernoulli draw per entry (torch's generator
spends a 32-bit word and a float conversion on each), which made dropout about a sixth of a GraphSAGE
training step here. The mask's bits are counter-based (:mod:`graphshard.mixing`): four 16-bit draws per 64-bit
word, keyed by one word drawn from torch's generator per call, so a run is as reproducible as with torch's own
dropout (``torch.manual_seed``, and a checkpoint's saved RNG state, fix it) and needs no state of its own.
Each entry is kept with probability ``1 - p`` (``p`` rounded to a multiple of 2^-16)."""

from __future__ import annotations

import math
import sys

import numpy as np
import torch

from ..jit import kernel
from ..mixing import GOLDEN, mix64

_FUSED = (torch.float32, torch.float64)


@kernel(inline="always")
def _entry(x, out, kept, i, bits, k, threshold, scale, zero):
    v = x[i]
    keep = np.uint32(np.uint16(bits >> np.uint64(16 * k))) >= threshold
    through = not v <= zero  # through the ReLU: positive, or NaN (which stays NaN, as in torch)
    r = v if through else zero
    out[i] = r * (scale if keep else zero)  # a dropped NaN or infinity gives NaN, as in torch
    kept[i] = np.int8(through) * (np.int8(1) + np.int8(keep))  # 2 kept, 1 dropped, 0 not through the ReLU


@kernel()
def _forward(x, out, kept, key, threshold, scale):
    zero = x.dtype.type(0)  # scalars of x's type: mixing in float64 would cost a conversion per entry
    full = x.size // 4
    for w in range(full):  # four entries per word, no branch on the size: the loop vectorises
        bits = mix64(key + np.uint64(w + 1) * np.uint64(GOLDEN))
        for k in range(4):
            _entry(x, out, kept, 4 * w + k, bits, k, threshold, scale, zero)
    bits = mix64(key + np.uint64(full + 1) * np.uint64(GOLDEN))
    for k in range(x.size - 4 * full):
        _entry(x, out, kept, 4 * full + k, bits, k, threshold, scale, zero)


@kernel()
def _backward(grad, kept, out, scale):
    zero = grad.dtype.type(0)
    for i in range(grad.size):
        c = kept[i]
        g = grad[i] * (scale if c == 2 else zero)  # a dropped entry passes 0 (NaN from a NaN), as in torch
        out[i] = g if c != 0 else zero


class _ReluDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        kept = torch.empty(x.shape, dtype=torch.int8)
        key = int(torch.empty((), dtype=torch.int64).random_())  # one draw of torch's generator per call
        scale = 1.0 / (1.0 - p)
        flat = x.view(-1).numpy()
        threshold, typed = np.uint32(round(p * 65536)), flat.dtype.type(scale)
        _forward(flat, out.view(-1).numpy(), kept.view(-1).numpy(), np.uint64(key), threshold, typed)
        ctx.save_for_backward(kept)
        ctx.scale = scale
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (kept,) = ctx.saved_tensors
        grad = grad.contiguous()
        out = torch.empty_like(grad)
        flat = grad.view(-1).numpy()
        _backward(flat, kept.view(-1).numpy(), out.view(-1).numpy(), flat.dtype.type(ctx.scale))
        return out, None


def relu_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """``F.dropout(F.relu(x), p, training)``: fused (see the module) for float32/float64 tensors on the CPU;
    other tensors draw the mask with :func:`keep_mask`. The distribution is torch's."""
    if not training or p == 0.0:
        return torch.relu(x)
    if p >= 1.0:
        return torch.zeros_like(x)
    if x.dtype in _FUSED and x.device.type == "cpu":
        return _ReluDropout.apply(x, p)
    x = torch.relu(x)
    return x * keep_mask(x.shape, p, x.device).to(x.dtype).mul_(1.0 / (1.0 - p))


def keep_mask(shape: torch.Size, p: float, device: torch.device | None = None) -> torch.Tensor:
    """Independent draws that are True with probability ``1 - p`` (``p`` rounded to a multiple of 2^-16), from 16
    random bits each: three draws per 64-bit word of torch's generator (its low 48 bits; the top bit of an int64
    draw is always 0), where ``torch.rand`` spends a 32-bit word per draw and its float conversion."""
    n = math.prod(shape)
    words = torch.empty((n + 2) // 3, dtype=torch.int64, device=device).random_()
    low = slice(0, 3) if sys.byteorder == "little" else slice(1, 4)  # the 16-bit lanes of the low 48 bits
    lanes = words.view(torch.int16).view(-1, 4)[:, low].reshape(-1)[:n]
    return (lanes >= round(p * 65536) - 32768).view(shape)


def warm_up() -> None:
    """Compile the fused kernels for float32 (or load them from the cache), so ranks started afterwards load
    them instead of each compiling them; float64 compiles in a rank the first time, once per machine."""
    _ReluDropout.apply(torch.ones(5, requires_grad=True), 0.5).sum().backward()

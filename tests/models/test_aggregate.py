"""The dropout mask: each entry kept with probability 1 - p, independently of its neighbours, scaled so
that the expected output is the input's ReLU, and the gradient flows through the kept entries only."""

from __future__ import annotations

import pytest
import torch

from graphshard.models.aggregate import keep_mask, relu_dropout


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_mask_keeps_one_minus_p_independently(p):
    torch.manual_seed(0)
    n = 1 << 20
    kept = keep_mask(torch.Size([n]), p).double()
    sd = (p * (1 - p) / n) ** 0.5
    assert abs(kept.mean().item() - (1 - p)) < 5 * sd
    for lag in (1, 2, 3, 4):  # entries drawn from one 64-bit word (lags 1-2) or from the next ones
        both = (kept[:-lag] * kept[lag:]).mean().item()
        assert abs(both - (1 - p) ** 2) < 5 * sd, lag
    blocks = kept.view(-1, 1024).mean(1)  # no drift along the tensor
    assert blocks.std().item() < 2 * (p * (1 - p) / 1024) ** 0.5


def test_relu_dropout_is_unbiased_and_masks_the_gradient():
    torch.manual_seed(1)
    x = torch.randn(64, 33, requires_grad=True)  # 2,112 entries: not a multiple of 3 draws per word
    total = torch.zeros(64, 33)
    for _ in range(400):
        total += relu_dropout(x, 0.3, True).detach()
    r = torch.relu(x).detach()
    pos = r > 0
    z = (total[pos] / 400 - r[pos]) / (r[pos] * (0.3 / 0.7 / 400) ** 0.5)  # each mean's error in standard errors
    assert z.abs().max() < 5 and (total[~pos] == 0).all()
    out = relu_dropout(x, 0.3, True)
    out.sum().backward()
    kept = out.detach() != 0
    assert torch.allclose(x.grad[kept], torch.full_like(x.grad[kept], 1 / 0.7))
    assert (x.grad[~kept] == 0).all()
    assert torch.equal(relu_dropout(x, 0.3, False), torch.relu(x))

"""ReLU + dropout: each entry kept with probability 1 - p, independently of its neighbours (within one random
word and across words) and of the previous call, scaled so that the expected output is the input's ReLU;
the gradient flows through the kept entries only; NaN and infinities come out as torch's own dropout gives
them; a seed fixes the masks. The fused path (float32/float64) and the fallback (other dtypes) alike."""

from __future__ import annotations

import pytest
import torch

from graphshard.models.dropout import keep_mask, relu_dropout


def _check_independent(kept: torch.Tensor, p: float) -> None:
    n = kept.numel()
    sd = (p * (1 - p) / n) ** 0.5
    assert abs(kept.mean().item() - (1 - p)) < 5 * sd
    for lag in (1, 2, 3, 4, 5, 8):  # entries drawn from one 64-bit word (lags 1-3) or from the next ones
        both = (kept[:-lag] * kept[lag:]).mean().item()
        assert abs(both - (1 - p) ** 2) < 5 * sd, lag
    blocks = kept.view(-1, 1024).mean(1)  # no drift along the tensor
    assert blocks.std().item() < 2 * (p * (1 - p) / 1024) ** 0.5


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_mask_keeps_one_minus_p_independently(p):
    torch.manual_seed(0)
    _check_independent(keep_mask(torch.Size([1 << 20]), p).double(), p)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_dropout_keeps_one_minus_p_independently(p, dtype):
    torch.manual_seed(0)
    ones = torch.ones(1 << 20, dtype=dtype)
    first = (relu_dropout(ones, p, True) != 0).double()
    _check_independent(first, p)
    second = (relu_dropout(ones, p, True) != 0).double()  # the next call draws a new mask
    both = (first * second).mean().item()
    assert abs(both - (1 - p) ** 2) < 5 * (p * (1 - p) / first.numel()) ** 0.5


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape", [(64, 33), (1,), (3,), (5,), (4097,)])  # sizes with a partial last word
def test_relu_dropout_is_unbiased_and_masks_the_gradient(dtype, shape):
    torch.manual_seed(1)
    x = torch.randn(shape).to(dtype).requires_grad_()
    total = torch.zeros(shape, dtype=torch.float64)
    for _ in range(400):
        total += relu_dropout(x, 0.3, True).detach().double()
    r = torch.relu(x).detach().double()
    pos = r > 0
    z = (total[pos] / 400 - r[pos]) / (r[pos] * (0.3 / 0.7 / 400) ** 0.5)  # each mean's error in standard errors
    assert z.abs().max() < 5 and (total[~pos] == 0).all()
    out = relu_dropout(x, 0.3, True)
    out.sum().backward()
    kept = out.detach() != 0
    assert torch.allclose(x.grad[kept].double(), torch.full_like(x.grad[kept].double(), 1 / 0.7), rtol=1e-2)
    assert (x.grad[~kept] == 0).all()
    assert torch.equal(relu_dropout(x, 0.3, False), torch.relu(x))


def test_a_seed_fixes_the_masks():
    x = torch.randn(1000)
    torch.manual_seed(7)
    a = [relu_dropout(x, 0.5, True) for _ in range(2)]
    torch.manual_seed(7)
    b = [relu_dropout(x, 0.5, True) for _ in range(2)]
    assert all(torch.equal(u, v) for u, v in zip(a, b)) and not torch.equal(a[0], a[1])


def test_nan_and_infinities_come_out_as_with_torchs_dropout():
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 2.0, -1.0, 0.0] * 500, requires_grad=True)
    torch.manual_seed(3)
    out = relu_dropout(x, 0.5, True)
    out.backward(torch.full_like(x, float("nan")))
    got, value = out.detach(), x.detach()
    # torch: ReLU, then a product with 0 or 1 / (1 - p); a NaN gradient passes the ReLU where x > 0 or x is NaN
    assert got[value.isnan()].isnan().all() and x.grad[value.isnan()].isnan().all()
    inf = got[value == float("inf")]
    assert ((inf == float("inf")) | inf.isnan()).all() and (inf == float("inf")).any() and inf.isnan().any()
    two = got[value == 2.0]
    assert ((two == 4.0) | (two == 0.0)).all() and x.grad[value == 2.0].isnan().all()
    below = value <= 0
    assert (got[below] == 0).all() and (x.grad[below] == 0).all()

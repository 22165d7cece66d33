"""Losses of node tasks against independent definitions: focal loss at gamma 0 is cross-entropy, its factor
against the formula; balanced class weights against scikit-learn; weight files checked."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.utils.class_weight import compute_class_weight

from graphshard.errors import InputError
from graphshard.tasks.losses import chosen_loss, class_weights, loss_function


class _Alone:
    """A one-rank context: all_reduce_sum of one rank is the array itself."""


@pytest.fixture
def one_rank(monkeypatch):
    monkeypatch.setattr("graphshard.tasks.losses.all_reduce_sum", lambda ctx, a, what: a)
    return _Alone()


def test_focal_loss_against_its_formula():
    torch.manual_seed(0)
    out, y = torch.randn(50, 4), torch.randint(0, 4, (50,))
    assert loss_function("classification", "focal", gamma=0.0)(out, y) == pytest.approx(
        float(F.cross_entropy(out, y)), rel=1e-6
    )
    p_t = torch.softmax(out, 1)[torch.arange(50), y].double()
    expected = float((-((1 - p_t) ** 2) * p_t.log()).mean())
    assert loss_function("classification", "focal", gamma=2.0)(out, y) == pytest.approx(expected, rel=1e-5)
    labels = (torch.rand(50, 4) < 0.3).float()
    assert loss_function("multilabel", "focal", gamma=0.0)(out, labels) == pytest.approx(
        float(F.binary_cross_entropy_with_logits(out, labels)), rel=1e-6
    )
    prob = torch.sigmoid(out.double())
    p_t = prob * labels + (1 - prob) * (1 - labels)
    expected = float((-((1 - p_t) ** 2) * p_t.log()).mean())
    assert loss_function("multilabel", "focal", gamma=2.0)(out, labels) == pytest.approx(expected, rel=1e-5)


def test_regression_losses_read_one_value_or_a_vector():
    out = torch.tensor([[1.0], [3.0]])
    assert loss_function("regression", "mse")(out, torch.tensor([0.0, 0.0])) == pytest.approx(5.0)
    assert loss_function("regression", "smooth_l1")(out, torch.tensor([0.0, 0.0])) == pytest.approx((0.5 + 2.5) / 2)


def test_balanced_weights_match_scikit_learn(one_rank):
    y = np.array([0, 0, 0, 1, 2, 2, 0, 1, 0, 0])
    got = class_weights(one_rank, "auto", "classification", y, width=3).numpy()
    assert got == pytest.approx(compute_class_weight("balanced", classes=np.arange(3), y=y), rel=1e-6)
    assert class_weights(one_rank, "auto", "classification", y, width=4).numpy()[3] == 0  # no item of class 3
    weighted = loss_function("classification", "cross_entropy", torch.from_numpy(got))
    out = torch.randn(10, 3)
    assert weighted(out, torch.from_numpy(y)) == pytest.approx(
        float(F.cross_entropy(out, torch.from_numpy(y), weight=torch.from_numpy(got))), rel=1e-6
    )
    labels = np.array([[1, 0], [0, 0], [1, 0], [0, 1]], dtype=np.float32)
    assert class_weights(one_rank, "auto", "multilabel", labels, width=2).tolist() == [
        1.0,
        3.0,
    ]  # negatives / positives


def test_weight_files_and_loss_choices(one_rank, tmp_path):
    np.save(tmp_path / "w.npy", np.array([1.0, 2.0, 0.5]))
    assert class_weights(one_rank, str(tmp_path / "w.npy"), "classification", np.zeros(0), width=3).tolist() == [
        1,
        2,
        0.5,
    ]
    with pytest.raises(InputError, match=r"w\.npy: class weights must be 4 numbers"):
        class_weights(one_rank, str(tmp_path / "w.npy"), "classification", np.zeros(0), width=4)
    np.save(tmp_path / "bad.npy", np.array([1.0, -2.0]))
    with pytest.raises(InputError, match="position 1: weight -2.0 is not a finite number >= 0"):
        class_weights(one_rank, str(tmp_path / "bad.npy"), "classification", np.zeros(0), width=2)
    with pytest.raises(InputError, match="not found"):
        class_weights(one_rank, str(tmp_path / "none.npy"), "classification", np.zeros(0), width=2)
    with pytest.raises(InputError, match="regression targets have none"):
        class_weights(one_rank, "auto", "regression", np.zeros(0), width=1)
    assert chosen_loss("auto", "multilabel") == "bce" and chosen_loss("smooth_l1", "regression") == "smooth_l1"
    with pytest.raises(InputError, match="--loss mse does not fit classification"):
        chosen_loss("mse", "classification")

"""The reference of the node tasks: plain PyG, full batch, one process, on the unpartitioned graph read from the
dataset directory with NumPy (not graphshard's reader): two SAGEConv layers (mean), ReLU and dropout between,
Adam; the loss of the label kind (cross-entropy, binary cross-entropy per label, mean squared error); the
test metrics (scikit-learn) at the epoch of the best validation metric (the first of equals)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from sklearn import metrics as sk
from torch import nn
from torch_geometric.nn import SAGEConv


class _Sage(nn.Module):
    def __init__(self, dims: int, hidden: int, out: int, dropout: float):
        super().__init__()
        self.convs, self.dropout = nn.ModuleList([SAGEConv(dims, hidden), SAGEConv(hidden, out)]), dropout

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        x = F.dropout(F.relu(self.convs[0](x, edge_index)), self.dropout, self.training)
        return self.convs[1](x, edge_index)


def scores(kind: str, out: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """scikit-learn's metrics of outputs ``out`` against labels ``y``."""
    if kind == "regression":
        out = out.reshape(y.shape)
        return {
            "rmse": sk.root_mean_squared_error(y, out),
            "mae": sk.mean_absolute_error(y, out),
            "r2": sk.r2_score(y, out),
        }
    if kind == "multilabel":
        pred = (out > 0).astype(int)
        return {
            "accuracy": sk.accuracy_score(y, pred),
            "f1_micro": sk.f1_score(y, pred, average="micro"),
            "f1_macro": sk.f1_score(y, pred, average="macro"),
            "roc_auc": sk.roc_auc_score(y, out, average="macro"),
        }
    pred = out.argmax(1)
    return {
        "accuracy": sk.accuracy_score(y, pred),
        "f1_micro": sk.f1_score(y, pred, average="micro"),
        "f1_macro": sk.f1_score(y, pred, average="macro"),
    }


def full_batch(
    d: Path, kind: str, select: str, *, epochs: int = 200, hidden: int = 64, lr: float = 0.01, seed: int = 0
) -> dict[str, float]:
    """Test metrics of the reference on dataset directory ``d`` at the best validation ``select``."""
    torch.manual_seed(seed)
    x = torch.from_numpy(np.load(d / "feat.npy")).float()
    y = np.load(d / "label.npy")
    edge_index = torch.from_numpy(np.stack([np.load(d / "src.npy"), np.load(d / "dst.npy")])).long()
    split = {k: np.load(d / f"{k}_idx.npy") for k in ("train", "val", "test")}
    width = int(y.max()) + 1 if kind == "classification" else (y.shape[1] if y.ndim == 2 else 1)
    model = _Sage(x.shape[1], hidden, width, 0.5)

    def test_outputs() -> dict[str, np.ndarray]:
        out = model(x, edge_index).numpy()
        return {k: out[split[k]] for k in ("val", "test")}

    return _fit(
        model,
        lambda: model(x, edge_index)[split["train"]],
        test_outputs,
        kind,
        select=select,
        y=y,
        split=split,
        epochs=epochs,
        lr=lr,
    )


def _loss(kind: str, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if kind == "classification":
        return F.cross_entropy(out, target.long())
    if kind == "multilabel":
        return F.binary_cross_entropy_with_logits(out, target.float())
    return F.mse_loss(out, target.float().view(out.shape))


def _fit(
    model: nn.Module,
    train_outputs: Any,
    test_outputs: Any,
    kind: str,
    *,
    select: str,
    y: np.ndarray,
    split: dict[str, np.ndarray],
    epochs: int,
    lr: float,
) -> dict[str, float]:
    """``epochs`` full-batch Adam steps on ``train_outputs()`` (the training items' outputs) against their labels;
    after each, the validation and test outputs (``test_outputs()``) in eval mode. Returns the test metrics at
    the best validation ``select`` (the lowest for rmse and mae; the first of equals)."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    target = torch.from_numpy(y)[split["train"]]
    lower = select in ("rmse", "mae")
    best: tuple[float, dict[str, float]] | None = None
    for _ in range(epochs):
        model.train()
        opt.zero_grad()
        _loss(kind, train_outputs(), target).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            got = test_outputs()
        val = scores(kind, got["val"], y[split["val"]])[select]
        if best is None or (val < best[0] if lower else val > best[0]):
            best = (val, scores(kind, got["test"], y[split["test"]]))
    assert best is not None
    return best[1]


class _EdgeModel(nn.Module):
    """The encoder above to ``hidden`` outputs, and an MLP of both ends' rows (graphshard's concat decoder)."""

    def __init__(self, dims: int, hidden: int, out: int):
        super().__init__()
        self.encoder = _Sage(dims, hidden, hidden, 0.5)
        self.mlp = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, out))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        h = self.encoder(x, edge_index)
        return self.mlp(torch.cat([h[pairs[0]], h[pairs[1]]], 1))


def full_batch_edges(
    d: Path, kind: str, select: str, *, epochs: int = 200, hidden: int = 64, lr: float = 0.01, seed: int = 0
) -> dict[str, float]:
    """Test metrics of the edge reference on dataset directory ``d`` (``edge_label.npy``, ``edge_*_idx.npy``)
    at the best validation ``select``: every labelled training edge in every step."""
    torch.manual_seed(seed)
    x = torch.from_numpy(np.load(d / "feat.npy")).float()
    edge_index = torch.from_numpy(np.stack([np.load(d / "src.npy"), np.load(d / "dst.npy")])).long()
    y = np.load(d / "edge_label.npy")
    split = {k: np.load(d / f"edge_{k}_idx.npy") for k in ("train", "val", "test")}
    width = int(y.max()) + 1 if kind == "classification" else (y.shape[1] if y.ndim == 2 else 1)
    model = _EdgeModel(x.shape[1], hidden, width)

    def test_outputs() -> dict[str, np.ndarray]:
        return {k: model(x, edge_index, edge_index[:, split[k]]).numpy() for k in ("val", "test")}

    def train_outputs() -> torch.Tensor:
        return model(x, edge_index, edge_index[:, split["train"]])

    return _fit(model, train_outputs, test_outputs, kind, select=select, y=y, split=split, epochs=epochs, lr=lr)

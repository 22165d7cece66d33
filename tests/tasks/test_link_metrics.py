"""Link ranking figures against plain-Python definitions, and filtered evaluation end to end: filtering
only takes candidates away, so filtered MRR and Hits@K are never below the raw ones, and a known edge
among the candidates no longer counts against the held-out edge."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphshard.datasets import community_graph, save_dataset
from graphshard.tasks.link_metrics import figures, is_known, rank_sums
from graphshard.train import TrainOptions, train


def _reference(pos, negs, keep, k):
    rr = hits = wins = pairs = 0.0
    for p, row, kept in zip(pos, negs, keep):
        above = sum(1.0 if n > p else 0.5 if n == p else 0.0 for n, c in zip(row, kept) if c)
        rank = 1 + above
        rr, hits = rr + 1 / rank, hits + (rank <= k)
        pairs += sum(kept)
        wins += sum(kept) - above
    return {"mrr": rr / len(pos), "auc": wins / pairs, f"hits@{k}": hits / len(pos)}


def test_rank_figures_equal_scikit_learn():
    """Without ties, each list a sample whose positive is "class" 0 among its 1 + C candidates: MRR is
    scikit-learn's label ranking average precision, Hits@K its top-k accuracy, AUC the mean of each list's
    ROC-AUC (every list has C candidates, so the pairs' share is the lists' mean)."""
    from sklearn import metrics as sk

    rng = np.random.default_rng(1)
    pos, negs = torch.from_numpy(rng.normal(size=300)), torch.from_numpy(rng.normal(size=(300, 20)))
    got = figures(rank_sums(pos, negs, 5), 5)
    scores = np.concatenate([pos.numpy()[:, None], negs.numpy()], 1)
    truth = np.zeros_like(scores, dtype=int)
    truth[:, 0] = 1
    assert got["mrr"] == pytest.approx(sk.label_ranking_average_precision_score(truth, scores), abs=1e-6)
    top = sk.top_k_accuracy_score(np.zeros(300, dtype=int), scores, k=5, labels=np.arange(21))
    assert got["hits@5"] == pytest.approx(top, abs=1e-6)
    per_list = [sk.roc_auc_score(t, s) for t, s in zip(truth, scores)]
    assert got["auc"] == pytest.approx(float(np.mean(per_list)), abs=1e-6)


def test_rank_figures_match_their_definitions():
    rng = np.random.default_rng(0)
    pos = rng.integers(0, 5, 40).astype(np.float32)  # small integers: many ties
    negs = rng.integers(0, 5, (40, 12)).astype(np.float32)
    keep = rng.random((40, 12)) < 0.7
    for mask in (None, keep):
        got = figures(
            rank_sums(
                torch.from_numpy(pos), torch.from_numpy(negs), 3, None if mask is None else torch.from_numpy(mask)
            ),
            3,
        )
        want = _reference(pos, negs, np.ones_like(keep) if mask is None else keep, 3)
        assert got.keys() == want.keys() and all(abs(got[k] - want[k]) < 1e-6 for k in got), (got, want)


def test_is_known_finds_exactly_the_known_pairs():
    known = np.unique(np.array([3 * 10 + 4, 3 * 10 + 7, 5 * 10 + 0]))
    src, dst = np.array([3, 5, 6]), np.array([[4, 5, 7], [0, 1, 4], [4, 7, 0]])
    assert is_known(known, src, dst, 10).tolist() == [[True, False, True], [True, False, False], [False] * 3]
    assert not is_known(np.zeros(0, dtype=np.int64), src, dst, 10).any()


def test_filtered_figures_are_never_below_raw(tmp_path):
    save_dataset(community_graph(num_nodes=600, seed=9), tmp_path / "data")
    m = train(
        TrainOptions(
            task="link",
            fanouts=[4, 4],
            batch_size=256,
            epochs=1,
            filtered=True,
            hits_k=5,
            eval_negatives=300,
            progress=False,
        ),
        num_procs=2,
        dataset=str(tmp_path / "data"),
        work_dir=str(tmp_path),
    )
    # 300 candidates among 600 nodes: many are the source's own neighbours, which filtering takes away
    assert m["test_mrr_filtered"] > m["test_mrr"] and m["test_hits@5_filtered"] >= m["test_hits@5"], m
    assert 0 <= m["test_hits@5"] <= 1 and "val_mrr_filtered" in m["epochs"][0]

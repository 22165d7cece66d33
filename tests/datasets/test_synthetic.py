"""Synthetic generators: structural guarantees and determinism."""

from __future__ import annotations

import numpy as np

from graphshard.datasets import community_graph, hetero_graph, rmat_graph


def _check_simple_symmetric(src, dst, n):
    assert (src != dst).all()
    key = src * n + dst
    assert len(np.unique(key)) == len(key)
    assert np.array_equal(np.sort(key), np.sort(dst * n + src))


def test_rmat_structure_and_determinism():
    a = rmat_graph(10, 8, feat_dim=3, seed=4)
    b = rmat_graph(10, 8, feat_dim=3, seed=4)
    src, dst = a.graph.edges[("_N", "_E", "_N")]
    _check_simple_symmetric(src, dst, 1024)
    assert np.array_equal(src, b.graph.edges[("_N", "_E", "_N")][0])
    assert a.graph.node_feats["_N"]["feat"].shape == (1024, 3)
    deg = np.bincount(src, minlength=1024)
    assert deg.max() > 10 * np.median(deg[deg > 0])  # power-law: heavy hubs
    assert 0.6 * 8 * 1024 < len(src) <= 2 * 8 * 1024


def test_community_has_label_signal():
    ds = community_graph(num_nodes=3000, num_classes=5, intra=0.9, seed=1)
    src, dst = ds.graph.edges[("_N", "_E", "_N")]
    _check_simple_symmetric(src, dst, 3000)
    label = ds.graph.node_feats["_N"]["label"]
    assert np.mean(label[src] == label[dst]) > 0.85
    masks = [ds.graph.node_feats["_N"][k] for k in ("train_mask", "val_mask", "test_mask")]
    assert not (masks[0] & masks[1]).any() and not (masks[1] & masks[2]).any()


def test_hetero_graph_types():
    ds = hetero_graph(num_papers=500, num_authors=200, num_institutions=10, num_fields=8, seed=2)
    g = ds.graph
    assert g.ntypes == ["paper", "author", "institution", "field"]
    assert set(g.node_feats) == {"paper"}
    src, dst = g.edges[("paper", "cites", "paper")]
    assert (src != dst).all()
    label = g.node_feats["paper"]["label"]
    assert np.mean(label[src] == label[dst]) > 0.6


def test_hetero_with_fewer_fields_than_classes():
    ds = hetero_graph(num_papers=300, num_authors=100, num_institutions=4, num_fields=3, num_classes=8, seed=0)
    src, dst = ds.graph.edges[("paper", "has_topic", "field")]
    assert len(src) > 0 and dst.max() < 3


def test_rmat_with_classes_has_labels_and_masks():
    """``num_classes``: labels read off the features (argmax of their first columns) and disjoint random
    10/5/5 % masks; the edges are those of the graph without classes."""
    import pytest

    from graphshard import InputError

    ds = rmat_graph(12, 4, feat_dim=6, seed=3, num_classes=4)
    plain = rmat_graph(12, 4, feat_dim=6, seed=3)
    nd = ds.graph.node_feats["_N"]
    assert ds.num_classes == 4 and plain.num_classes is None and "label" not in plain.graph.node_feats["_N"]
    np.testing.assert_array_equal(nd["label"], nd["feat"][:, :4].argmax(axis=1))
    np.testing.assert_array_equal(nd["feat"], plain.graph.node_feats["_N"]["feat"])
    assert np.array_equal(ds.graph.edges[("_N", "_E", "_N")][0], plain.graph.edges[("_N", "_E", "_N")][0])
    masks = np.stack([nd["train_mask"], nd["val_mask"], nd["test_mask"]])
    assert masks.sum(axis=0).max() == 1
    np.testing.assert_allclose(masks.mean(axis=1), [0.10, 0.05, 0.05], atol=0.015)
    with pytest.raises(InputError, match="at most feat_dim"):
        rmat_graph(6, 4, feat_dim=2, num_classes=3)

"""Sparse node features in format v1: stored as their CSR tensors, listed in the config, read back equal to
the source rows of each partition's inner nodes, and checked against the other partitions' headers."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from graphshard import load_partition, partition_graph
from graphshard.datasets import Dataset, load_dataset, save_dataset
from graphshard.errors import FormatError
from graphshard.format.tensorfile import read_header
from graphshard.sparse import CSRRows
from tests.graphs import sparse_hetero


def test_partitions_store_csr_rows_of_their_inner_nodes(tmp_path):
    g = sparse_hetero()
    dense = g.node_feats["paper"]["bow"].dense()
    partition_graph(g, "s", 2, tmp_path, part_method="metis")
    cfg = json.loads((tmp_path / "s.json").read_text())
    assert cfg["sparse_features"] == {"node_feats": ["paper/bow"]}
    assert cfg["feature_schema"]["node_feats"]["paper/bow"] == {"dtype": "F32", "shape": [50]}
    for p in range(2):
        header = read_header(tmp_path / f"part{p}" / "node_feats.safetensors")
        assert {"paper/bow/indptr", "paper/bow/indices", "paper/bow/data"} <= set(header) and "paper/bow" not in header
        part = load_partition(tmp_path / "s.json", p)
        x = part.node_feats["paper/bow"]
        book = part.partition_book
        orig = book.to_original("paper", torch.arange(*book.node_range(p, "paper"))).numpy()
        assert isinstance(x, CSRRows) and np.array_equal(x.dense(), dense[orig])


def test_a_partition_whose_feature_is_dense_elsewhere_is_refused(tmp_path):
    partition_graph(sparse_hetero(), "s", 2, tmp_path, part_method="metis")
    cfg = json.loads((tmp_path / "s.json").read_text())
    cfg.pop("sparse_features")  # the config no longer says the feature is CSR: its tensors do not fit
    (tmp_path / "s.json").write_text(json.dumps(cfg))
    with pytest.raises(FormatError, match="node_feats.safetensors"):
        load_partition(tmp_path / "s.json", 0)


def test_datasets_keep_csr_features(tmp_path):
    from graphshard.graph import Graph

    g = sparse_hetero()
    feats = {**g.node_feats, "paper": {"feat": g.node_feats["paper"]["bow"], "label": g.node_feats["paper"]["label"]}}
    save_dataset(Dataset("s", Graph(g.num_nodes, g.edges, feats, g.edge_feats), 4, "paper"), tmp_path / "d")
    meta = json.loads((tmp_path / "d" / "meta.json").read_text())
    assert meta["features"]["paper"]["format"] == "csr"
    back = load_dataset(tmp_path / "d").graph.node_feats["paper"]["feat"]
    assert isinstance(back, CSRRows) and np.array_equal(back.dense(), g.node_feats["paper"]["bow"].dense())


def test_chunking_writes_csr_features_dense(tmp_path):
    from graphshard.chunked.load import load_chunked_graph
    from graphshard.chunked.spec import read_metadata
    from graphshard.chunked.writer import chunk_graph

    g = sparse_hetero()
    chunk_graph(g, tmp_path / "c", 4, "numpy")  # 60 papers: chunks of 15 rows
    back = load_chunked_graph(read_metadata(tmp_path / "c")).node_feats["paper"]["bow"]
    assert np.array_equal(back, g.node_feats["paper"]["bow"].dense())

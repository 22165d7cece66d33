"""Datasets: the ``../shared/data`` directory layout (read and write), OGB's raw layout (read) and
synthetic generators."""

from .dataset import Dataset
from .layout import load_dataset, save_dataset
from .ogb import load_ogb
from .synthetic import community_graph, hetero_graph, rmat_graph

__all__ = ["Dataset", "community_graph", "hetero_graph", "load_dataset", "load_ogb", "rmat_graph", "save_dataset"]

"""Datasets: the ``../shared/data`` directory layout (read and write) and synthetic generators."""

from .layout import Dataset, load_dataset, save_dataset
from .synthetic import community_graph, hetero_graph, rmat_graph

__all__ = ["Dataset", "community_graph", "hetero_graph", "load_dataset", "rmat_graph", "save_dataset"]

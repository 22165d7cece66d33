"""Plots of a partitioning (:func:`plot_partitions`) and of a training run (:func:`plot_metrics`).

matplotlib is optional (``pip install 'graphshard[plot]'``) and imported only when a figure is drawn; the
figures never touch pyplot or a display, and are written atomically.
"""

from __future__ import annotations

from .metrics import epoch_table, plot_metrics
from .partitions import PartitionSummary, partition_summary, plot_partitions

__all__ = ["PartitionSummary", "epoch_table", "partition_summary", "plot_metrics", "plot_partitions"]

"""``graphshard inspect --plot``: a picture of a partitioning — sizes, the cut between partitions, and
which edges the cut takes (by the in-degree of their destination).

An edge belongs to the partition owning its destination (it is an inner edge there: every inner node's
in-edges are stored with it), so each partition's inner edges, with their sources' owners taken from the
partition book, give one column of the cut matrix and the in-degree of every destination.
"""

from __future__ import annotations

import os
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..format.config import read_config
from ..format.load import load_partition, load_partition_book
from ._figure import hide_axis, integer_ticks, new_figure, save_figure

ANNOTATE_UP_TO = 12  # write the counts into the heat map's cells up to this many partitions


@dataclass(frozen=True)
class PartitionSummary:
    """The numbers behind :func:`plot_partitions`; arrays are int64, indexed by partition or degree.

    ``cut_matrix[i, j]``: edges whose source is owned by partition ``i`` and destination by ``j`` (``i != j``;
    the diagonal is 0). ``cut_by_degree[d]`` / ``kept_by_degree[d]``: cut / uncut edges whose destination has
    in-degree ``d`` (in the homogeneous view: in-edges of every type).
    """

    graph_name: str
    part_method: str
    num_parts: int
    halo_hops: int
    _: KW_ONLY
    num_nodes: int
    num_edges: int
    inner_nodes: np.ndarray
    halo_nodes: np.ndarray
    inner_edges: np.ndarray
    halo_edges: np.ndarray
    cut_matrix: np.ndarray
    cut_by_degree: np.ndarray
    kept_by_degree: np.ndarray

    @property
    def edge_cut(self) -> int:
        return int(self.cut_matrix.sum())


def partition_summary(part_config: str | os.PathLike, verify: bool = False) -> PartitionSummary:
    """Read every partition of ``part_config`` (structure only, memory-mapped) and count what the plot shows.

    ``verify=True`` checks each file's sha256 first. Raises :class:`~graphshard.errors.FormatError` on a
    missing or inconsistent partition.
    """
    cfg = read_config(part_config)
    book = load_partition_book(cfg.path)
    num_parts = cfg.num_parts
    sizes = np.zeros((4, num_parts), dtype=np.int64)  # inner nodes, HALO nodes, inner edges, HALO edges
    cut_matrix = np.zeros((num_parts, num_parts), dtype=np.int64)
    cut_by_degree = np.zeros(1, dtype=np.int64)
    kept_by_degree = np.zeros(1, dtype=np.int64)
    for p in range(num_parts):
        g = load_partition(cfg.path, p, load_feats=False, verify=verify).graph
        n_inner = g.num_inner_nodes
        inner = g.edata["inner_edge"].numpy()
        n_inner_edges = int(inner.sum())
        sizes[:, p] = n_inner, g.num_nodes - n_inner, n_inner_edges, g.num_edges - n_inner_edges
        indptr = g.indptr.numpy()
        dst = np.repeat(np.arange(g.num_nodes, dtype=np.int64), np.diff(indptr))[inner]
        src_owner = book.nid2partid(g.ndata["_ID"].numpy()[g.indices.numpy()[inner]]).numpy()
        cut_matrix[:, p] = np.bincount(src_owner, minlength=num_parts)
        cut_matrix[p, p] = 0
        dst_degree = np.bincount(dst, minlength=n_inner)[dst]  # all in-edges of an inner node are stored here
        is_cut = src_owner != p
        cut_by_degree = _add(cut_by_degree, np.bincount(dst_degree[is_cut]))
        kept_by_degree = _add(kept_by_degree, np.bincount(dst_degree[~is_cut]))
    length = max(len(cut_by_degree), len(kept_by_degree))
    return PartitionSummary(
        graph_name=cfg.graph_name,
        part_method=cfg.part_method,
        num_parts=num_parts,
        halo_hops=cfg.halo_hops,
        num_nodes=cfg.num_nodes,
        num_edges=cfg.num_edges,
        inner_nodes=sizes[0],
        halo_nodes=sizes[1],
        inner_edges=sizes[2],
        halo_edges=sizes[3],
        cut_matrix=cut_matrix,
        cut_by_degree=_pad(cut_by_degree, length),
        kept_by_degree=_pad(kept_by_degree, length),
    )


def plot_partitions(
    part_config: str | os.PathLike, out: str | os.PathLike, *, verify: bool = False, dpi: int = 120
) -> Path:
    """Draw :func:`partition_summary` of ``part_config`` into the image ``out`` (PNG, or the format its suffix
    names), written atomically; returns ``out``. Needs matplotlib (``graphshard[plot]``), else
    :class:`~graphshard.errors.InputError`."""
    fig = new_figure(12, 9)  # fails before any partition is read when matplotlib is missing
    s = partition_summary(part_config, verify=verify)
    (ax_nodes, ax_edges), (ax_cut, ax_deg) = fig.subplots(2, 2)
    _stacked(ax_nodes, s.inner_nodes, s.halo_nodes, "nodes", title="nodes per partition")
    _stacked(ax_edges, s.inner_edges, s.halo_edges, "edges", title="stored edges per partition (inner = owned)")
    _cut_heatmap(fig, ax_cut, s.cut_matrix)
    _degree_histogram(ax_deg, s.cut_by_degree, s.kept_by_degree)
    share = s.edge_cut / s.num_edges if s.num_edges else 0.0
    fig.suptitle(
        f"{s.graph_name}: {s.num_nodes:,} nodes, {s.num_edges:,} edges, {s.num_parts} partitions "
        f"({s.part_method}, {s.halo_hops}-hop HALO); edge cut {s.edge_cut:,} ({100 * share:.2f}%)"
    )
    return save_figure(fig, out, dpi)


# -- internals ---------------------------------------------------------------------------------
def _add(acc: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Element-wise sum of two count vectors of possibly different lengths."""
    length = max(len(acc), len(counts))
    return _pad(acc, length) + _pad(counts, length)


def _pad(counts: np.ndarray, length: int) -> np.ndarray:
    out = np.zeros(length, dtype=np.int64)
    out[: len(counts)] = counts
    return out


def _stacked(ax: Any, inner: np.ndarray, halo: np.ndarray, what: str, *, title: str) -> None:
    x = np.arange(len(inner))
    ax.bar(x, inner, label=f"inner {what}", color="tab:blue")
    ax.bar(x, halo, bottom=inner, label=f"HALO {what}", color="tab:orange")
    ax.set(title=title, xlabel="partition", ylabel=what)
    integer_ticks(ax.xaxis)
    top = float((inner + halo).max()) if len(inner) else 1.0
    ax.set_ylim(0, 1.3 * max(top, 1.0))  # headroom above the tallest bar: the legend sits there, over no bar
    ax.legend(loc="upper center", ncols=2, frameon=False)


def _cut_heatmap(fig: Any, ax: Any, matrix: np.ndarray) -> None:
    from matplotlib import colormaps

    n = matrix.shape[0]
    if n < 2:
        hide_axis(ax, "one partition: no edge cut")
        ax.set_title("cut edges between partitions")
        return
    masked = np.ma.masked_array(matrix, mask=np.eye(n, dtype=bool))
    cmap = colormaps["Reds"].with_extremes(bad="0.85")
    image = ax.imshow(masked, cmap=cmap, vmin=0, interpolation="nearest")
    fig.colorbar(image, ax=ax, label="edges")
    ax.set(title="cut edges between partitions", xlabel="destination owned by", ylabel="source owned by")
    integer_ticks(ax.xaxis, ax.yaxis)
    if n <= ANNOTATE_UP_TO:
        top = max(int(matrix.max()), 1)
        for i, j in zip(*np.nonzero(~np.eye(n, dtype=bool))):
            ax.text(
                j,
                i,
                f"{int(matrix[i, j]):,}",
                ha="center",
                va="center",
                fontsize=8,
                color="white" if matrix[i, j] > 0.6 * top else "black",
            )


def _log_bins(max_degree: int, num: int = 25) -> np.ndarray:
    """Integer bin edges ``1 = e_0 < ... < e_k = max_degree + 1``, about evenly spaced on a log scale."""
    edges = np.floor(np.geomspace(1, max_degree + 1, num)).astype(np.int64)
    return np.unique(np.append(edges, max_degree + 1))


def _degree_histogram(ax: Any, cut: np.ndarray, kept: np.ndarray) -> None:
    ax.set_title("in-degree of the destination, cut vs kept edges")
    max_degree = len(cut) - 1
    if max_degree < 1 or not (cut.sum() + kept.sum()):
        hide_axis(ax, "no edges")
        return
    edges = _log_bins(max_degree)
    widths = np.diff(edges)
    centres = np.sqrt(edges[:-1] * (edges[1:] - 1.0).clip(min=edges[:-1]))  # geometric centre of [lo, hi - 1]
    for counts, label, colour in ((kept, "kept (same partition)", "tab:blue"), (cut, "cut", "tab:red")):
        per_bin = np.add.reduceat(counts, edges[:-1]) / widths
        shown = np.where(per_bin > 0, per_bin, np.nan)  # empty bins leave a gap on the log axis
        ax.plot(centres, shown, marker="o", markersize=4, color=colour, label=f"{label}: {int(counts.sum()):,}")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="in-degree of the destination node",
        ylabel="edges per unit of degree (log bins)",
    )
    ax.legend()

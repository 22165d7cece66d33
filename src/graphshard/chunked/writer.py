"""Writing a graph in the chunked format (``graphshard chunk`` / :func:`chunk_graph`)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..format.outputs import check_output_dir
from ..format.staging import naming, staged_dir
from ..graph import Graph
from ..names import check_path_name, inside
from ..sparse import CSRRows
from .spec import FORMATS, ChunkedMeta, FileSpec, read_metadata, write_metadata

_EXT = {"csv": "csv", "numpy": "npy", "parquet": "parquet"}


def chunk_graph(
    g: Graph,
    out_dir: str | os.PathLike,
    num_chunks: int,
    fmt: str = "numpy",
    *,
    graph_name: str = "graph",
    feat_num_chunks: int | None = None,
    overwrite: bool = False,
) -> ChunkedMeta:
    """Write ``g`` as a chunked graph: edges of every type in ``num_chunks`` files of format ``fmt``;
    node and edge features in ``feat_num_chunks`` (default ``num_chunks``) NumPy files each (Parquet
    when ``fmt="parquet"``). A type with fewer rows than chunks gets fewer chunks. Written into a
    staging directory inside ``out_dir``, then moved into place (metadata.json last). ``out_dir`` must be
    new, empty or an earlier chunked output of the same graph unless ``overwrite`` (which keeps files of other names); a
    failed write (full disk: :class:`~graphshard.errors.WriteError` naming the file) leaves nothing behind."""
    if fmt not in FORMATS:
        raise InputError(f"unknown chunk format {fmt!r}; choose one of {list(FORMATS)}")
    if num_chunks < 1:
        raise InputError(f"num_chunks must be >= 1, got {num_chunks}")
    check_path_name(graph_name, "chunk_graph: graph_name")
    final = check_output_dir(out_dir, "chunked", overwrite, graph=graph_name)
    with staged_dir(final, "chunked") as tmp:
        _write_graph(g, tmp, num_chunks, fmt, graph_name=graph_name, feat_chunks=feat_num_chunks or num_chunks)
    return read_metadata(final)


def _write_graph(g: Graph, tmp: Path, num_chunks: int, fmt: str, *, graph_name: str, feat_chunks: int) -> None:
    data_fmt = "parquet" if fmt == "parquet" else "numpy"
    edges, node_data, edge_data = {}, {}, {}
    for et, (src, dst) in g.edges.items():
        name = f"{et[0]}__{et[1]}__{et[2]}"
        edges[et] = _write_chunks(inside(tmp, "edges", name), np.stack([src, dst], axis=1), num_chunks, fmt, root=tmp)
        feats = g.edge_feats.get(et, {})
        if feats:
            edge_data[et] = {
                k: _write_chunks(inside(tmp, "edge_data", name, k), v, feat_chunks, data_fmt, root=tmp)
                for k, v in feats.items()
            }
    for t, feats in g.node_feats.items():
        node_data[t] = {
            k: _write_chunks(inside(tmp, "node_data", t, k), v, feat_chunks, data_fmt, root=tmp)
            for k, v in feats.items()
        }
    meta = ChunkedMeta(
        tmp / "metadata.json",
        graph_name,
        dict(g.num_nodes),
        {et: g.num_edges(et) for et in g.canonical_etypes},
        edges=edges,
        node_data=node_data,
        edge_data=edge_data,
    )
    write_metadata(meta)


def _write_chunks(folder: Path, rows: np.ndarray | CSRRows, num_chunks: int, fmt: str, *, root: Path) -> FileSpec:
    folder.mkdir(parents=True, exist_ok=True)
    count = max(1, min(num_chunks, rows.shape[0]))
    paths = []
    table = rows if isinstance(rows, CSRRows) else np.asarray(rows)
    for i, ids in enumerate(np.array_split(np.arange(rows.shape[0]), count)):
        path = folder / f"chunk-{i}.{_EXT[fmt]}"
        # the chunked format is dense: a slice of NumPy rows is a view, of CSR rows their dense rows
        _write_one(path, table[ids[0] : ids[-1] + 1] if ids.size else table[:0], fmt)
        paths.append(path)
    return FileSpec(fmt, tuple(paths), " ", str(folder.relative_to(root)))


def _write_one(path: Path, rows: np.ndarray, fmt: str) -> None:
    with naming(path):
        _write_rows(path, rows, fmt)


def _write_rows(path: Path, rows: np.ndarray, fmt: str) -> None:
    if fmt == "numpy":
        np.save(path, np.ascontiguousarray(rows), allow_pickle=False)
    elif fmt == "csv":
        np.savetxt(path, rows if rows.ndim == 2 else rows[:, None], fmt="%d", delimiter=" ")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        flat = rows[:, None] if rows.ndim == 1 else rows.reshape(rows.shape[0], int(np.prod(rows.shape[1:])))
        pq.write_table(pa.table({f"c{j}": flat[:, j] for j in range(flat.shape[1])}), path)

"""R-MAT written straight into the chunked format, chunk by chunk, in memory that does not grow with the
edges: for graphs larger than the machine that generates them (``graphshard generate rmat --chunked``).

The sampled edges are those of :func:`~graphshard.datasets.rmat_graph` with the same seed (each a function
of its index) and the same scrambled vertex IDs; edge chunk ``i`` holds sampled edges ``[i E / K,
(i + 1) E / K)`` in both directions, self-loops dropped. Duplicate pairs are kept (a chunk never sees the
others'): the in-memory generator removes them, so its edge count is a little lower. Node data, chunked
alike: ``feat`` (standard normal float32, ``feat_dim`` wide), and with ``num_classes``: ``label`` (the
argmax of the first ``num_classes`` feature columns, so features predict it) and random
``train_mask``/``val_mask``/``test_mask`` (``fractions``). Memory: the scramble permutation (8 bytes per
node) and one chunk of edges or node rows at a time. Disk: :func:`rmat_chunked_disk` (checked before any
work)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..chunked.spec import ChunkedMeta, FileSpec, read_metadata, write_metadata
from ..disk import FILE_BYTES, DiskNeed
from ..disk import check_disk as disk_guard
from ..errors import InputError
from ..format.outputs import check_output_dir
from ..format.staging import naming, staged_dir
from ..graph import DEFAULT_ETYPE, DEFAULT_NTYPE
from .synthetic import GRAPH500, rmat_edges

SPLITS = ("train_mask", "val_mask", "test_mask")


def rmat_chunked_disk(
    out_dir: str | os.PathLike,
    scale: int,
    edge_factor: int = 16,
    feat_dim: int = 0,
    *,
    num_chunks: int = 8,
    num_classes: int = 0,
) -> DiskNeed:
    """What :func:`write_rmat_chunked` writes (staged inside ``out_dir``, then moved into place: no copy): every
    sampled edge in both directions as two int64 (32 bytes per sampled edge; self-loops, dropped, make it a
    little less), ``feat`` (float32), ``label`` (int64) and the three masks (one byte per node each), and a
    header per chunk file."""
    n, sampled = 1 << scale, edge_factor << scale
    chunks = min(num_chunks, n)
    files = num_chunks + chunks * ((1 if feat_dim else 0) + (4 if num_classes else 0))
    parts = {
        "edge chunks": 32 * sampled,
        "node data": 4 * feat_dim * n + (11 * n if num_classes else 0),
        "headers": FILE_BYTES * (files + 1),
    }
    return DiskNeed("generate rmat --chunked", Path(out_dir).expanduser().absolute(), parts)


def write_rmat_chunked(
    out_dir: str | os.PathLike,
    scale: int,
    edge_factor: int = 16,
    feat_dim: int = 0,
    *,
    num_chunks: int = 8,
    seed: int = 0,
    num_classes: int = 0,
    fractions: tuple[float, float, float] = (0.1, 0.05, 0.05),
    graph_name: str | None = None,
    overwrite: bool = False,
    check_disk: bool = True,
) -> ChunkedMeta:
    """Write the R-MAT graph of ``2**scale`` nodes as a chunked graph into ``out_dir`` (see the module
    docstring); staged, then published with ``metadata.json`` last. ``check_disk``: refuse before any work
    when :func:`rmat_chunked_disk` does not fit the free space there (with a margin, see
    :mod:`graphshard.disk`); False skips it."""
    if scale < 1 or scale > 40 or edge_factor < 1 or num_chunks < 1 or feat_dim < 0 or num_classes < 0:
        raise InputError("scale must be in [1, 40], edge_factor and num_chunks >= 1, feat_dim and num_classes >= 0")
    if num_classes and num_classes > feat_dim:
        raise InputError(f"num_classes ({num_classes}) needs feat_dim >= num_classes (labels are read off features)")
    name = graph_name or f"rmat{scale}"
    final = check_output_dir(out_dir, "chunked", overwrite, graph=name)
    if check_disk:
        disk_guard(
            rmat_chunked_disk(final, scale, edge_factor, feat_dim, num_chunks=num_chunks, num_classes=num_classes),
            hint=" (--out)",
        )
    n, sampled = 1 << scale, edge_factor << scale
    with staged_dir(final, "chunked") as tmp:
        scramble = np.random.default_rng([seed, 1]).permutation(n)
        edges, counts = _edge_chunks(tmp, scale, sampled, num_chunks, seed=seed, scramble=scramble)
        del scramble
        node_data = _node_chunks(tmp, n, feat_dim, num_chunks, seed=seed, classes=num_classes, fractions=fractions)
        et = DEFAULT_ETYPE
        meta = ChunkedMeta(
            tmp / "metadata.json",
            name,
            {DEFAULT_NTYPE: n},
            {et: int(sum(counts))},
            edges={et: edges},
            node_data={DEFAULT_NTYPE: node_data} if node_data else {},
            edge_chunk_counts={et: counts},
        )
        write_metadata(meta)
    return read_metadata(final)


def _save(path: Path, rows: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with naming(path):
        np.save(path, rows, allow_pickle=False)
    return path


def _edge_chunks(
    tmp: Path, scale: int, sampled: int, k: int, *, seed: int, scramble: np.ndarray
) -> tuple[FileSpec, list[int]]:
    folder, paths, counts = tmp / "edges" / "_N___E___N", [], []
    for i in range(k):
        lo, hi = sampled * i // k, sampled * (i + 1) // k
        src, dst = rmat_edges(scale, hi - lo, *GRAPH500, seed, lo)
        keep = src != dst
        src, dst = scramble[src[keep]], scramble[dst[keep]]
        rows = np.empty((2 * src.shape[0], 2), dtype=np.int64)
        rows[0::2, 0], rows[0::2, 1], rows[1::2, 0], rows[1::2, 1] = src, dst, dst, src
        paths.append(_save(folder / f"chunk-{i}.npy", rows))
        counts.append(int(rows.shape[0]))
    return FileSpec("numpy", tuple(paths), " ", "edges/_N___E___N"), counts


def _node_chunks(
    tmp: Path, n: int, dim: int, k: int, *, seed: int, classes: int, fractions: tuple[float, float, float]
) -> dict[str, FileSpec]:
    names = (["feat"] if dim else []) + (["label", *SPLITS] if classes else [])
    paths: dict[str, list[Path]] = {name: [] for name in names}
    for i in range(min(k, n)):
        lo, hi = n * i // k, n * (i + 1) // k
        rng = np.random.default_rng([seed, 2, i])
        x = rng.standard_normal((hi - lo, dim), dtype=np.float32) if dim else None
        rows: dict[str, np.ndarray] = {"feat": x} if x is not None else {}
        if classes:
            assert x is not None  # num_classes <= feat_dim (checked first): labels are read off the features
            rows["label"] = np.argmax(x[:, :classes], axis=1).astype(np.int64)
            r = rng.random(hi - lo)
            edges = np.cumsum((0.0, *fractions))
            rows |= {m: (r >= edges[j]) & (r < edges[j + 1]) for j, m in enumerate(SPLITS)}
        for name, value in rows.items():
            paths[name].append(_save(tmp / "node_data" / DEFAULT_NTYPE / name / f"chunk-{i}.npy", value))
    return {name: FileSpec("numpy", tuple(p), " ", f"node_data/{DEFAULT_NTYPE}/{name}") for name, p in paths.items()}

"""Reading the chunked input: rows of edge chunks as homogeneous (src, dst), and edge data aligned with them."""

from __future__ import annotations

import numpy as np

from ...chunked.load import read_checked_edges
from ...chunked.readers import read_data_like
from ...chunked.spec import ChunkedMeta, FileSpec
from ...errors import InputError
from ...graph import EType, etype_str


class EdgeReader:
    """Homogeneous ``(src, dst)`` of rows of edge chunks. NumPy chunks are mapped piece by piece (only
    those rows become resident); other formats are parsed once per chunk and kept until the next one."""

    def __init__(self, meta: ChunkedMeta, node_off: np.ndarray) -> None:
        self.meta, self.node_off = meta, node_off
        self._ntype = {t: i for i, t in enumerate(meta.ntypes)}
        self._cache: tuple = (None, None)

    def rows(self, r: int, et: EType, c: int, lo: int, *, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``[lo, hi)`` of chunk ``c`` of edge type ``et`` (index ``r``), with homogeneous node IDs."""
        so, do = self.node_off[self._ntype[et[0]]], self.node_off[self._ntype[et[2]]]
        if self.meta.edges[et].format == "numpy":
            src, dst = read_checked_edges(self.meta, et, c, (lo, hi))
            return src + so, dst + do
        if self._cache[0] != (r, c):  # CSV / Parquet: parse each chunk once per pass
            self._cache = ((r, c), read_checked_edges(self.meta, et, c))
        src, dst = self._cache[1]
        return src[lo:hi] + so, dst[lo:hi] + do


def aligned_edge_data(spec: FileSpec, c: int, row_shape: tuple[int, ...], rows: int) -> np.ndarray:
    """Edge data chunk ``c``, which must hold exactly the ``rows`` rows of edge chunk ``c``."""
    arr = np.asarray(read_data_like(spec, c, row_shape))
    if arr.shape[0] != rows:
        raise InputError(
            f"{spec.paths[c]}: {arr.shape[0]} rows, but edge chunk {c} holds {rows} edges "
            f"({spec.where}); edge data must be split exactly like the edge chunks"
        )
    return arr


def check_chunk_count(meta: ChunkedMeta, et: EType, spec: FileSpec) -> None:
    """Edge data ``spec`` of ``et`` must be split into as many chunks as the edges of ``et``."""
    edges = len(meta.edges[et].paths)
    if len(spec.paths) != edges:
        raise InputError(
            f"{spec.where}: {len(spec.paths)} chunks, but the edges of {etype_str(et)!r} have "
            f"{edges}: edge data must align with the edge chunks"
        )

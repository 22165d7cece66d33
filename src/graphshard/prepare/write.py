"""Writing a prepared graph's files: the ID maps and node rows in ID order (checked to be so), edge rows,
label and split arrays as NumPy chunks, and the file specs the chunked format's ``metadata.json`` lists."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..chunked.spec import FileSpec
from ..errors import FormatError
from ..format.staging import naming
from .engine import Engine

CHUNK_ROWS = 1 << 23  # rows of a NumPy label or mask chunk
NID, SRC, DST = "__gs_nid", "__gs_src", "__gs_dst"


def parquet_rows(files: list[Path]) -> list[int]:
    import pyarrow.parquet as pq

    return [int(pq.ParquetFile(p).metadata.num_rows) for p in files]


def check_in_order(files: list[Path], column: str, total: int, what: str) -> None:
    """The files hold ``column`` = 0, 1, ..., total - 1 in file order (read from the Parquet statistics, and
    from the values where a file's statistics are missing): else :class:`FormatError` (an engine that lost
    the order it was asked for)."""
    import pyarrow.parquet as pq

    expected = 0
    for path in files:
        f = pq.ParquetFile(path)
        rows = f.metadata.num_rows
        if rows == 0:
            continue
        col = f.read(columns=[column]).column(0).to_numpy()
        if col[0] != expected or col[-1] != expected + rows - 1 or (rows > 1 and (np.diff(col) != 1).any()):
            raise FormatError(f"{path}: {what} are not in ID order (the engine lost the order asked of it)")
        expected += rows
    if expected != total:
        raise FormatError(f"{what}: {expected} rows written, {total} expected")


def write_sorted(engine: Engine, sql: str, folder: Path, total: int, *, what: str) -> list[Path]:
    """Rows of ``sql`` (with an ``__gs_nid`` column) written in ID order, checked to be, and the files renamed
    ``part-00000.parquet``, ``part-00001.parquet``, ... in that order, whatever the engine called them (Spark's
    names hold a random part that a reader must not sort by): a reader of the folder sorts by name."""
    files = engine.write(sql, folder, ordered_by=NID)
    check_in_order(files, NID, total, what)
    named = [folder / f"part-{i:05d}.parquet" for i in range(len(files))]
    for old, new in zip(files, named):
        if old != new:
            old.rename(new)  # never onto another of them: the engines' names differ from these
    return named


def parquet_spec(
    files: list[Path], columns: list[str], where: str, kind: str = "data", *, matrix: bool = False
) -> FileSpec:
    """Parquet chunk files read through ``columns``; ``matrix``: their rows are vectors (even of one column)."""
    return FileSpec(
        "parquet", tuple(files), " ", where, kind=kind, metadata=None, columns=tuple(columns), matrix=matrix
    )


def npy_chunks(folder: Path, name: str, rows: np.ndarray, where: str, *, cuts: list[int] | None = None) -> FileSpec:
    """``rows`` as NumPy chunk files ``name-<i>.npy`` (cut at ``cuts``, else every :data:`CHUNK_ROWS`)."""
    folder.mkdir(parents=True, exist_ok=True)
    if cuts is None:
        cuts = list(range(0, rows.shape[0], CHUNK_ROWS)) + [rows.shape[0]]
        cuts = cuts if len(cuts) > 1 else [0, 0]
    paths = []
    for i, (lo, hi) in enumerate(zip(cuts[:-1], cuts[1:])):
        path = folder / f"{name}-{i}.npy"
        with naming(path):
            np.save(path, np.ascontiguousarray(rows[lo:hi]), allow_pickle=False)
        paths.append(path)
    return FileSpec("numpy", tuple(paths), " ", where)

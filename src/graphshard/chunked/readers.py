"""Reading chunk files: CSV (pyarrow, multithreaded), NumPy (memory-mapped), Parquet (pyarrow).

Every error names the file and, where it applies, the line and the value at fault.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import InputError
from .spec import FileSpec


def read_edges(spec: FileSpec, i: int) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` per-type IDs (int64) of edge chunk ``i``."""
    path = spec.paths[i]
    if spec.format == "numpy":
        arr = _npy(path)
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise InputError(f"{path}: edge chunk must have shape (E, 2), got {arr.shape} ({spec.where})")
        cols = [arr[:, 0], arr[:, 1]]
    elif spec.format == "parquet":
        cols = _parquet_columns(path, spec)
        if len(cols) != 2:
            raise InputError(f"{path}: edge chunk must have 2 columns (src, dst), got {len(cols)} ({spec.where})")
    else:
        cols = _csv_int_columns(path, spec.delimiter, 2, spec.where)
    out = []
    for c in cols:
        if c.size and not np.issubdtype(c.dtype, np.integer):
            raise InputError(f"{path}: edge IDs must be integers, got {c.dtype} ({spec.where})")
        out.append(np.asarray(c, dtype=np.int64))
    return out[0], out[1]


def read_data(spec: FileSpec, i: int) -> np.ndarray:
    """Rows of data chunk ``i`` (NumPy chunks are memory-mapped)."""
    path = spec.paths[i]
    if spec.format == "numpy":
        return _npy(path)
    if spec.format == "parquet":
        cols = _parquet_columns(path, spec)
        return cols[0] if len(cols) == 1 else np.stack(cols, axis=1)
    import pyarrow.csv as pacsv

    table = _read_csv(pacsv, path, spec.delimiter, spec.where, None)
    cols = [c.to_numpy() for c in table.columns]
    for j, c in enumerate(cols):
        if not (np.issubdtype(c.dtype, np.number) or c.dtype == bool):
            raise InputError(_csv_problem(path, spec.delimiter, spec.where, f"column {j} is not numeric",
                                          len(cols), numeric=True))
    return cols[0] if len(cols) == 1 else np.stack(cols, axis=1)


def read_data_like(spec: FileSpec, i: int, row_shape: tuple[int, ...]) -> np.ndarray:
    """:func:`read_data`, refusing a chunk whose rows are shaped otherwise than the first chunk's."""
    arr = read_data(spec, i)
    if tuple(arr.shape[1:]) != tuple(row_shape):
        raise InputError(f"{spec.paths[i]}: rows of shape {tuple(arr.shape[1:])}, but {spec.paths[0].name} has "
                         f"rows of shape {tuple(row_shape)} ({spec.where}); every chunk of a feature has the same columns")
    return arr


def count_rows(spec: FileSpec, i: int) -> int:
    """Number of rows of chunk ``i`` without reading its values where the format allows."""
    path = spec.paths[i]
    if spec.format == "numpy":
        return int(_npy(path).shape[0])
    if spec.format == "parquet":
        import pyarrow.parquet as pq

        try:
            return int(pq.ParquetFile(path).metadata.num_rows)
        except Exception as exc:  # pyarrow raises several types for files that are not Parquet
            raise InputError(f"{path}: cannot read Parquet ({exc}) ({spec.where})") from None
    with open(path, "rb") as f:
        data = f.read()
    blank = 0 if data.startswith((b"\n", b"\r\n")) else min(
        (i + 1 for i in (data.find(b"\n\n"), data.find(b"\n\r\n")) if i >= 0), default=-1)
    if blank >= 0:
        line = data[:blank].count(b"\n") + 1
        raise InputError(f"{path}, line {line}: blank line ({spec.where}); a CSV chunk "
                         "holds one row per line and nothing else")
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:
        raise InputError(f"{path}: not a plain NumPy array ({exc})") from None


def _parquet_columns(path: Path, spec: FileSpec) -> list[np.ndarray]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise InputError(f"{path}: cannot read Parquet ({exc}) ({spec.where})") from None
    return [c.to_numpy() for c in table.columns]


def _read_csv(pacsv, path: Path, delimiter: str, where: str, types):
    import pyarrow as pa

    try:
        return pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(autogenerate_column_names=True, use_threads=True),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, ignore_empty_lines=False),
            convert_options=pacsv.ConvertOptions(column_types=types) if types else None,
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        if types is None:
            raise InputError(f"{path}: cannot parse CSV ({exc}) ({where})") from None
        raise InputError(_csv_problem(path, delimiter, where, exc, len(types))) from None


def _csv_int_columns(path: Path, delimiter: str, ncols: int, where: str) -> list[np.ndarray]:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if path.stat().st_size == 0:
        return [np.zeros(0, np.int64) for _ in range(ncols)]
    table = _read_csv(pacsv, path, delimiter, where, {f"f{k}": pa.int64() for k in range(ncols)})
    if table.num_columns != ncols:
        raise InputError(_csv_problem(path, delimiter, where, f"expected {ncols} columns, got {table.num_columns}",
                                      ncols))
    return [c.to_numpy() for c in table.columns]


def _csv_problem(path: Path, delimiter: str, where: str, exc: object, ncols: int = 2, numeric: bool = False) -> str:
    """Locate the first bad line (only on the error path) so the message names it."""
    parse, kind = (float, "a number") if numeric else (int, "an integer")
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                return f"{path}, line {lineno}: blank line ({where})"
            fields = line.rstrip("\r\n").split(delimiter)
            if len(fields) != ncols:
                return f"{path}, line {lineno}: expected {ncols} columns, got {len(fields)}: {line.strip()!r} ({where})"
            for value in fields:
                try:
                    parse(value)
                except ValueError:
                    return f"{path}, line {lineno}: {value!r} is not {kind} ({where})"
    return f"{path}: cannot parse CSV ({exc}) ({where})"

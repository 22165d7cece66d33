"""Reading chunk files: CSV (pyarrow, multithreaded), NumPy (memory-mapped), Parquet (pyarrow).

Every error names the file and, where it applies, the line and the value at fault.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..format.npyfile import read_npy
from ..format.tensorfile import dtype_code
from ..ids import beyond_int64
from .csv_lines import BLOCK, first_bad_line, header_message, line_message, looks_like_header
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
        if len(cols) != 2 or any(c.ndim != 1 for c in cols):
            raise InputError(f"{path}: edge chunk must have 2 columns (src, dst), got {len(cols)} ({spec.where})")
    else:
        cols = _csv_int_columns(path, spec.delimiter, 2, spec.where)
    out = []
    for c, end in zip(cols, ("source", "destination")):
        if c.size and c.dtype.kind not in "iu":  # not bool, nor timedelta64 (which NumPy counts as integers)
            raise InputError(f"{path}: edge IDs must be integers, got {c.dtype} ({spec.where})")
        big = beyond_int64(np.asarray(c))
        if big is not None:
            raise InputError(
                f"{path}, line {big + 1}: {end} ID {int(c[big])} does not fit a 64-bit signed integer ({spec.where})"
            )
        out.append(np.asarray(c, dtype=np.int64) if c.size else np.zeros(0, np.int64))  # empty: of any dtype
    return out[0], out[1]


def read_data(spec: FileSpec, i: int) -> np.ndarray:
    """Rows of data chunk ``i`` (NumPy chunks are memory-mapped)."""
    path = spec.paths[i]
    if spec.format == "numpy":
        return _numeric(_npy(path), path, spec)
    if spec.format == "parquet":
        cols = _parquet_columns(path, spec)
        for j, c in enumerate(cols):
            _numeric(c, path, spec, f"column {j} ")
        if len(cols) == 1 and not (spec.matrix and cols[0].ndim == 1):
            return cols[0]
        return _numeric(np.concatenate([c.reshape(c.shape[0], -1) for c in cols], axis=1), path, spec)
    import pyarrow.csv as pacsv

    table = _read_csv(pacsv, path, spec.delimiter, spec.where, types=None)
    cols = [c.to_numpy() for c in table.columns]
    for j, c in enumerate(cols):
        if c.dtype.kind not in "biuf":
            raise InputError(
                _csv_problem(
                    path, spec.delimiter, spec.where, f"column {j} is not numeric", ncols=len(cols), integers=False
                )
            )
    return _numeric(cols[0] if len(cols) == 1 else np.stack(cols, axis=1), path, spec)


def _numeric(arr: np.ndarray, path: Path, spec: FileSpec, what: str = "") -> np.ndarray:
    """``arr`` if it holds numbers graphshard can store (booleans, integers, floats of at most 64 bits; in
    this machine's byte order), else :class:`InputError` naming the file."""
    native = arr.dtype.newbyteorder("=") if arr.dtype.byteorder not in "=|" else arr.dtype
    if arr.dtype.kind not in "biuf" or dtype_code(native) is None:
        raise InputError(
            f"{path}: {what}values of type {arr.dtype} ({spec.where}); data chunks hold numbers: "
            "booleans, integers or floats of at most 64 bits"
        )
    return arr if native == arr.dtype else arr.astype(native)


def read_data_like(spec: FileSpec, i: int, row_shape: tuple[int, ...]) -> np.ndarray:
    """:func:`read_data`, refusing a chunk whose rows are shaped otherwise than the first chunk's."""
    arr = read_data(spec, i)
    if tuple(arr.shape[1:]) != tuple(row_shape):
        raise InputError(
            f"{spec.paths[i]}: rows of shape {tuple(arr.shape[1:])}, but {spec.paths[0].name} has "
            f"rows of shape {tuple(row_shape)} ({spec.where}); every chunk of a feature has the same columns"
        )
    return arr


def count_rows(spec: FileSpec, i: int) -> int:
    """Number of rows of chunk ``i`` without reading its values where the format allows."""
    path = spec.paths[i]
    if spec.format == "numpy":
        return int(_npy(path).shape[0])  # not 0-d: _npy refuses that
    if spec.format == "parquet":
        import pyarrow.parquet as pq

        try:
            return int(pq.ParquetFile(path).metadata.num_rows)
        except Exception as exc:  # pyarrow raises several types for files that are not Parquet
            raise InputError(f"{path}: cannot read Parquet ({exc}) ({spec.where})") from None
    with open(path, "rb") as f:
        data = f.read()
    blank = (
        0
        if data.startswith((b"\n", b"\r\n"))
        else min((i + 1 for i in (data.find(b"\n\n"), data.find(b"\n\r\n")) if i >= 0), default=-1)
    )
    lone_cr = _lone_cr(data)
    if blank >= 0 or lone_cr is not None:  # an error, named at the chunk's first bad line (perhaps an earlier one)
        found = first_bad_line(path, spec.delimiter, _columns(spec), spec.kind == "edges")
        if found is not None:
            raise InputError(line_message(path, *found, spec.where))
        line = data[:blank].count(b"\n") + 1 if blank >= 0 else lone_cr
        raise InputError(
            f"{path}, line {line}: blank line or a carriage return inside a line ({spec.where}); a CSV chunk "
            "holds one row per line and nothing else"
        )
    end = data.find(b"\n", 0, 1 << 16)
    first = data[: end if end >= 0 else 1 << 16].decode("utf-8", "replace").rstrip("\r")  # a header is short
    if looks_like_header(first.split(spec.delimiter), _columns(spec)):
        raise InputError(header_message(path, first, spec.where))
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _lone_cr(data: bytes) -> int | None:
    """The line (1-based) of the first carriage return that ends no line: one neither before a newline nor the
    last byte. pyarrow would end a line there, and the row counts would no longer be the newlines'."""
    if b"\r" not in data:
        return None
    arr = np.frombuffer(data, dtype=np.uint8)
    cr = np.flatnonzero(arr[:-1] == 13)
    lone = cr[arr[cr + 1] != 10]
    return data.count(b"\n", 0, int(lone[0])) + 1 if lone.size else None


def explain_csv_rows(spec: FileSpec, first: int = 0) -> str | None:
    """Why the CSV chunks of ``spec`` hold other rows than declared, if a line of them is no data row:
    the message naming the file and the first such line (chunk ``first`` is looked at first); None when
    every line is a row (or the chunks are not CSV). Only for error paths: see :func:`first_bad_line`."""
    if spec.format != "csv" or not spec.paths:
        return None
    for i in [first, *(j for j in range(len(spec.paths)) if j != first)]:
        found = first_bad_line(spec.paths[i], spec.delimiter, _columns(spec), spec.kind == "edges")
        if found is not None:
            return line_message(spec.paths[i], *found, spec.where)
    return None


def _npy(path: Path) -> np.ndarray:
    """The rows of a NumPy chunk, memory-mapped; never unpickled (see :func:`read_npy`)."""
    arr = read_npy(path, InputError, mmap=True)
    if arr.ndim == 0:
        raise InputError(f"{path}: a single value (a 0-d array), not rows of a chunk")
    return arr


def _parquet_columns(path: Path, spec: FileSpec) -> list[np.ndarray]:
    """The columns of a Parquet chunk (those ``spec.columns`` names, in that order): a list column (a vector
    per row, of one length) becomes a 2-D array, its elements then count as columns of their own."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path, columns=list(spec.columns) if spec.columns else None)
        if spec.columns:
            table = table.select(list(spec.columns))
        cols = []
        for j, c in enumerate(table.columns):
            if c.null_count:  # a missing value: to_numpy() would make it NaN (or None)
                row = int(np.argmax(c.is_null().to_numpy(zero_copy_only=False)))
                raise InputError(
                    f"{path}, line {row + 1}: column {j} holds no value (null) ({spec.where}); "
                    "chunks hold no missing values"
                )
            cols.append(_vectors(c, path, spec, j) if _is_list(c.type) else c.to_numpy())
    except InputError:
        raise
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise InputError(f"{path}: cannot read Parquet ({exc}) ({spec.where})") from None
    return cols


def _is_list(t) -> bool:
    import pyarrow as pa

    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def _vectors(column, path: Path, spec: FileSpec, j: int) -> np.ndarray:
    """A list column whose rows all have one length, as a 2-D array."""
    import pyarrow.compute as pc

    chunk = column.combine_chunks()
    lengths = pc.list_value_length(chunk).to_numpy(zero_copy_only=False)
    width = int(lengths[0]) if lengths.size else 0
    if lengths.size and (lengths != width).any():
        row = int(np.argmax(lengths != width))
        raise InputError(
            f"{path}, line {row + 1}: column {j} holds a list of {int(lengths[row])} values, line 1 one of {width} "
            f"({spec.where}); a feature's rows have one length"
        )
    values = pc.list_flatten(chunk)
    if values.null_count:
        raise InputError(f"{path}: column {j} holds lists with missing values ({spec.where})")
    return values.to_numpy(zero_copy_only=False).reshape(lengths.size, width)


def _read_csv(pacsv, path: Path, delimiter: str, where: str, *, types):
    import pyarrow as pa

    ncols, integers = len(types) if types else None, types is not None
    lines, newlines, hexadecimal, tab = _scan(path)
    try:
        table = pacsv.read_csv(
            # pyarrow refuses a file of one line without its newline ("Empty CSV file or block")
            io.BytesIO(path.read_bytes() + b"\n") if lines == 1 and not newlines else path,
            read_options=pacsv.ReadOptions(autogenerate_column_names=True, use_threads=True),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, ignore_empty_lines=False),
            # no field is a missing value: an empty field, NA or null is an error naming its line, not a NaN
            convert_options=pacsv.ConvertOptions(
                column_types=types or None, null_values=[], strings_can_be_null=False, quoted_strings_can_be_null=False
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InputError(_csv_problem(path, delimiter, where, exc, ncols=ncols, integers=integers)) from None
    tabbed = tab and delimiter != "\t"
    if table.num_rows != lines or (integers and hexadecimal) or tabbed:
        # pyarrow ends rows at a lone CR too, reads 0xFF as 255 (0xFFFFFFFFFFFFFFFF as -1) and "\t1" as 1: a chunk
        # holds one row per line, of decimal numbers between delimiters
        reason = f"{table.num_rows} rows in {lines} lines"
        if table.num_rows == lines:
            reason = "hexadecimal number" if integers and hexadecimal else "a tab inside a field"
        raise InputError(_csv_problem(path, delimiter, where, reason, ncols=ncols, integers=integers))
    return table


def _scan(path: Path) -> tuple[int, int, bool, bool]:
    """The number of lines of a CSV chunk (a last line without its newline counts), of newlines, whether it
    holds an x (as hexadecimal numbers do) and whether it holds a tab: one pass at the speed of memchr."""
    newlines, hexadecimal, tab, last = 0, False, False, b"\n"
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(BLOCK), b""):
            newlines += block.count(b"\n")
            hexadecimal = hexadecimal or b"x" in block or b"X" in block
            tab = tab or b"\t" in block
            last = block[-1:]
    return newlines + (last != b"\n"), newlines, hexadecimal, tab


def _csv_int_columns(path: Path, delimiter: str, ncols: int, where: str) -> list[np.ndarray]:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if path.stat().st_size == 0:
        return [np.zeros(0, np.int64) for _ in range(ncols)]
    table = _read_csv(pacsv, path, delimiter, where, types={f"f{k}": pa.int64() for k in range(ncols)})
    if table.num_columns != ncols:
        raise InputError(
            _csv_problem(path, delimiter, where, f"expected {ncols} columns, got {table.num_columns}", ncols=ncols)
        )
    return [c.to_numpy() for c in table.columns]


def _csv_problem(
    path: Path, delimiter: str, where: str, exc: object, *, ncols: int | None = 2, integers: bool = True
) -> str:
    """Locate the first bad line (only on the error path) so the message names it."""
    found = first_bad_line(path, delimiter, ncols, integers)
    if found is None:
        return f"{path}: cannot parse CSV ({exc}) ({where})"
    return line_message(path, *found, where)


def _columns(spec: FileSpec) -> int | None:
    return 2 if spec.kind == "edges" else None

"""Assignment files: one ``<ntype>.txt`` (line i = partition of node i) or ``<ntype>.npy`` per node type,
plus ``partition_meta.json``. Written atomically; read back with validation naming file, line and value."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..format.jsonfile import read_json_object
from ..format.npyfile import read_npy
from ..format.outputs import prepare_output_dir
from ..format.staging import atomic_file
from ..ids import beyond_int64
from ..names import check_path_name, inside

META_NAME = "partition_meta.json"
VERSION = 1


def write_assignment(
    out_dir: str | os.PathLike,
    per_type: dict[str, np.ndarray],
    num_parts: int,
    method: str,
    *,
    fmt: str = "txt",
    extra: dict | None = None,
    overwrite: bool = False,
) -> Path:
    """Write one file per node type and ``partition_meta.json`` last (each via a temporary file).

    ``out_dir`` must be new, empty or an earlier assignment output unless ``overwrite`` (which replaces
    only the files written here). A failed write (full disk) raises :class:`WriteError` naming the file,
    leaves no temporary file and no ``partition_meta.json``."""
    if fmt not in ("txt", "npy"):
        raise InputError(f"assignment format must be 'txt' or 'npy', got {fmt!r}")
    for t in per_type:
        check_path_name(t, "assignment: node type", extra=len(".txt"))
    out = prepare_output_dir(out_dir, "assignment", overwrite, graph=(extra or {}).get("graph_name"))
    (out / META_NAME).unlink(missing_ok=True)
    for t, parts in per_type.items():
        with atomic_file(inside(out, f"{t}.{fmt}")) as tmp:
            _write_parts(tmp, parts, fmt)
    meta = {
        "version": VERSION,
        "method": method,
        "num_parts": num_parts,
        "format": fmt,
        "num_nodes_per_type": {t: int(p.shape[0]) for t, p in per_type.items()},
        **(extra or {}),
    }
    with atomic_file(out / META_NAME) as tmp:
        tmp.write_text(json.dumps(meta, indent=1) + "\n")
    return out / META_NAME


def _write_parts(path: Path, parts: np.ndarray, fmt: str) -> None:
    if fmt == "txt":
        with open(path, "w") as f:
            for lo in range(0, parts.shape[0], 1 << 22):  # stream in blocks
                block = parts[lo : lo + (1 << 22)]
                if block.size:
                    f.write("\n".join(map(str, block.tolist())) + "\n")
    else:
        with open(path, "wb") as f:
            np.save(f, parts.astype(np.int64), allow_pickle=False)


def read_assignment(
    parts_dir: str | os.PathLike, num_nodes: dict[str, int], num_parts: int | None = None
) -> tuple[dict[str, np.ndarray], int]:
    """Read and validate assignment files for every node type; returns ``(per_type, num_parts)``.

    ``num_parts`` defaults to ``partition_meta.json``'s value, else to the largest partition ID + 1.
    """
    d = Path(parts_dir)
    meta = read_partition_meta(d)
    if num_parts is None and meta is not None:
        num_parts = meta["num_parts"]
    per_type = {t: _read_one(d, t, n) for t, n in num_nodes.items()}
    top = max((int(a.max()) for a in per_type.values() if a.size), default=0)
    num_parts = num_parts if num_parts is not None else top + 1
    for t, a in per_type.items():
        bad = (a < 0) | (a >= num_parts)
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"{_file_of(d, t)}, line {i + 1}: partition {int(a[i])} is outside [0, {num_parts})")
    return per_type, num_parts


def read_partition_meta(parts_dir: str | os.PathLike) -> dict | None:
    """``partition_meta.json`` of an assignment directory (None if absent), checked: a JSON object with
    an integer ``num_parts`` >= 1 and a string ``method`` if present."""
    path = Path(parts_dir) / META_NAME
    if not path.is_file():
        return None
    meta = read_json_object(path)
    parts = meta.get("num_parts")
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise InputError(
            f"{path}: key 'num_parts' must be an integer >= 1, got {parts!r}"
            if "num_parts" in meta
            else f"{path}: missing key 'num_parts'"
        )
    if not isinstance(meta.get("method", ""), str):
        raise InputError(f"{path}: key 'method' must be a string")
    return meta


def _file_of(d: Path, t: str) -> Path:
    for ext in ("npy", "txt"):
        if (d / f"{t}.{ext}").is_file():
            return d / f"{t}.{ext}"
    raise InputError(f"{d}: no assignment file for node type {t!r} (expected {t}.txt or {t}.npy)")


def _read_one(d: Path, t: str, n: int) -> np.ndarray:
    path = _file_of(d, t)
    if path.suffix == ".npy":
        arr = read_npy(path)
        if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
            raise InputError(f"{path}: must be a 1-D integer array, got {arr.dtype}{arr.shape}")
    else:
        arr = _read_txt(path)
    if arr.shape[0] != n:
        raise InputError(f"{path}: {arr.shape[0]} entries, but node type {t!r} has {n} nodes")
    big = beyond_int64(arr)
    if big is not None:  # named as stored: a cast would make 2**64 - 1 the partition -1
        raise InputError(f"{path}, line {big + 1}: partition {int(arr[big])} does not fit a 64-bit signed integer")
    return arr.astype(np.int64, copy=False)


def _read_txt(path: Path) -> np.ndarray:
    """One partition ID per line, parsed by pyarrow; on any failure the file is read again line by line
    (:func:`_read_lines`), which names the first line that is not an ID (or accepts what pyarrow cannot:
    a single line without its newline). Blank lines at the end are ignored, blank lines between IDs are
    errors (line i holds the partition of node i)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if path.stat().st_size == 0:
        return np.zeros(0, np.int64)
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(autogenerate_column_names=True),
            parse_options=pacsv.ParseOptions(ignore_empty_lines=False),
            convert_options=pacsv.ConvertOptions(
                column_types={"f0": pa.int64()}, null_values=[""], quoted_strings_can_be_null=False
            ),
        )
    except (pa.ArrowException, UnicodeDecodeError):
        return _read_lines(path)
    if table.num_columns != 1:
        raise InputError(f"{path}: expected one partition ID per line, got {table.num_columns} columns")
    col = table.column(0)
    if not col.null_count:
        return col.to_numpy()
    valid = col.is_valid().to_numpy(zero_copy_only=False)
    end = len(valid) - int(np.argmax(valid[::-1])) if valid.any() else 0  # blank lines after the last ID: fine
    if not valid[:end].all():
        raise InputError(
            f"{path}, line {int(np.argmin(valid[:end])) + 1}: empty line (line i holds the partition of node i)"
        )
    return col.slice(0, end).to_numpy()


_ID = re.compile(rb"\s*([+-]?[0-9]+)\s*")


def _read_lines(path: Path) -> np.ndarray:
    """The slow path of :func:`_read_txt`: every line an integer of 64 bits (blank lines at the end
    ignored), or an InputError naming the first line that is not."""
    out, blank = [], None
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, 1):
            m = _ID.fullmatch(line.strip(b"\r\n \t").strip(b'"'))
            if not line.strip():
                blank = blank or lineno
                continue
            if blank is not None:
                raise InputError(f"{path}, line {blank}: empty line (line i holds the partition of node i)")
            if m is None or not -(2**63) <= int(m.group(1)) < 2**63:
                shown = line.rstrip(b"\r\n")[:40].decode("utf-8", "replace")
                raise InputError(
                    f"{path}, line {lineno}: {shown!r} is not a partition ID"
                    + (" (beyond 64-bit integers)" if m is not None else "")
                )
            out.append(int(m.group(1)))
    return np.array(out, dtype=np.int64)

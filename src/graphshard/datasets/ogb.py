"""Read the raw layout OGB's node property prediction datasets unpack to, without the ``ogb`` package and
without downloading anything: gzip CSV files (no header unless said), parsed by pyarrow.

Homogeneous (ogbn-arxiv, ogbn-products)::

    raw/edge.csv.gz            src,dst per line
    raw/num-node-list.csv.gz   the number of nodes
    raw/node-feat.csv.gz       one row of floats per node (optional)
    raw/node-label.csv.gz      one label per node (optional; empty or NaN: unlabelled, stored as -1)
    split/<scheme>/{train,valid,test}.csv.gz   node indices

Heterogeneous (ogbn-mag)::

    raw/num-node-dict.csv.gz                        a header of node types, then their counts
    raw/relations/<src>___<rel>___<dst>/edge.csv.gz per relation
    raw/node-feat/<type>/node-feat.csv.gz           per type that has features
    raw/node-label/<type>/node-label.csv.gz         per labelled type
    split/<scheme>/<type>/{train,valid,test}.csv.gz

A dataset has one split scheme (``time``, ``sales_ranking``, …); with several, pass ``scheme``. Files are
parsed by pyarrow's streaming CSV reader, each column straight to its final type (float32 features,
int64 IDs), about 1 MiB of text at a time, and features go block by block into their preallocated
array: ``graphshard chunk --dataset OGB_DIR`` holds each feature matrix once (benchmarks/ogb_layout.py).
On 200,000 × 64 features (49 MiB) this took 0.72 s and 112 MiB of peak growth. pyarrow's multithreaded
whole-file reader took 0.81 s and 140 MiB, holding the table next to the array: gzip decompression is
sequential either way. Every file is checked: a missing
file, a malformed row, a node ID out of range or a row count that does not match the node count is an
:class:`InputError` naming the file.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..format.inputs import require_dir
from ..graph import DEFAULT_ETYPE, DEFAULT_NTYPE, Graph
from ..limits import check_count
from ..names import SUFFIX_ROOM, check_etype_names, check_path_name
from .dataset import Dataset

SPLIT_FILES = {"train": "train_mask", "valid": "val_mask", "test": "test_mask"}


def is_ogb_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds OGB's raw node-property layout (homogeneous or heterogeneous)."""
    raw = Path(path) / "raw"
    return (raw / "num-node-list.csv.gz").is_file() or (raw / "num-node-dict.csv.gz").is_file()


def load_ogb(path: str | os.PathLike, scheme: str | None = None) -> Dataset:
    """The graph, features, labels and split masks of an OGB raw directory (see the module docstring)."""
    d = require_dir(path)
    if not is_ogb_dir(d):
        raise InputError(f"{d}: not an OGB raw directory (no raw/num-node-list.csv.gz nor raw/num-node-dict.csv.gz)")
    split = _scheme(d, scheme)
    if (d / "raw" / "num-node-dict.csv.gz").is_file():
        return _hetero(d, split)
    return _homo(d, split)


def _homo(d: Path, split: Path) -> Dataset:
    raw = d / "raw"
    n = _count(raw / "num-node-list.csv.gz")
    src, dst = _edges(raw / "edge.csv.gz", n, n)
    feats = _node_data(raw / "node-feat.csv.gz", raw / "node-label.csv.gz", n)
    feats |= _masks(split, n)
    g = Graph({DEFAULT_NTYPE: n}, {DEFAULT_ETYPE: (src, dst)}, {DEFAULT_NTYPE: feats} if feats else {})
    return Dataset(d.name, g, _classes(feats))


def _hetero(d: Path, split: Path) -> Dataset:
    raw = d / "raw"
    num_nodes = _count_dict(raw / "num-node-dict.csv.gz")
    edges = {}
    rel_dir = raw / "relations"
    if not rel_dir.is_dir():
        raise InputError(f"{rel_dir}: missing (a heterogeneous OGB dataset keeps each relation there)")
    for sub in sorted(p for p in rel_dir.iterdir() if p.is_dir()):
        et = tuple(sub.name.split("___"))
        if len(et) != 3:
            raise InputError(f"{sub}: a relation directory is named <src>___<relation>___<dst>")
        check_etype_names(et, f"{rel_dir}")
        for t in (et[0], et[2]):
            if t not in num_nodes:
                raise InputError(f"{sub}: node type {t!r} is not in {raw / 'num-node-dict.csv.gz'}")
        edges[et] = _edges(sub / "edge.csv.gz", num_nodes[et[0]], num_nodes[et[2]])
    node_feats, classes, target = {}, None, DEFAULT_NTYPE
    for t, n in num_nodes.items():
        feats = _node_data(raw / "node-feat" / t / "node-feat.csv.gz", raw / "node-label" / t / "node-label.csv.gz", n)
        feats |= _masks(split / t, n)
        if "label" in feats:
            classes, target = _classes(feats), t
        if feats:
            node_feats[t] = feats
    return Dataset(d.name, Graph(num_nodes, edges, node_feats), classes, target)


def _scheme(d: Path, scheme: str | None) -> Path:
    """The split directory: ``split/<scheme>``, the only one there when ``scheme`` is None."""
    base = d / "split"
    if scheme is not None:
        check_path_name(scheme, "OGB split scheme")
        if not (base / scheme).is_dir():
            raise InputError(f"{base / scheme}: no such split scheme")
        return base / scheme
    schemes = sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    if len(schemes) > 1:
        raise InputError(f"{base}: several split schemes ({', '.join(schemes)}); choose one (load_ogb(..., scheme=))")
    return base / schemes[0] if schemes else base / "none"


def _batches(path: Path, dtype: type, nullable: bool = False):
    """The record batches of the (gzip) CSV file ``path``, every column parsed straight to ``dtype``
    (the column count is read from the first line that is not blank), in blocks of about 1 MiB of text; an
    InputError naming the file when it is missing, unreadable (a damaged gzip stream included) or not numeric."""
    import gzip
    import io
    import zlib

    import pyarrow as pa
    import pyarrow.csv as csv

    if not path.is_file():
        raise InputError(f"{path}: missing")
    source: Path | io.BytesIO = path
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as f:
            first = f.readline()
            while first and not first.strip():  # blank lines are not rows (pyarrow skips them too)
                first = f.readline()
            if not first.endswith(b"\n") and not f.read(1):  # one line without its newline: pyarrow cannot
                source = io.BytesIO(first + b"\n")  # tell its columns, so it is given the newline
        first.decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:
        raise InputError(f"{path}: not a readable CSV file ({exc})") from None
    if not first.strip():
        return
    width = first.count(b",") + 1
    arrow_type = pa.from_numpy_dtype(np.dtype(np.float64 if nullable else dtype))  # labels may be NaN
    try:
        reader = csv.open_csv(
            source,
            read_options=csv.ReadOptions(autogenerate_column_names=True, block_size=1 << 20),
            convert_options=csv.ConvertOptions(column_types={f"f{j}": arrow_type for j in range(width)}),
        )
        yield from reader
    except (pa.ArrowException, OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: not a CSV file of numbers ({exc})") from None


def _matrix(path: Path, dtype: type, rows: int | None = None, nullable: bool = False) -> np.ndarray:
    """The numeric CSV ``path`` as a 2-D array (``rows`` of them when given, else an error naming the
    file), filled block by block: the parsed text is never held whole next to the array."""
    out, pieces, at = None, [], 0
    for batch in _batches(path, dtype, nullable):
        k = batch.num_columns
        if rows is None:
            pieces.append(np.column_stack([_numeric(c, path, dtype, nullable, first_row=at) for c in batch.columns]))
            at += batch.num_rows
            continue
        if out is None:
            out = np.empty((rows, k), dtype=dtype)
        if at + batch.num_rows > rows:
            raise InputError(f"{path}: more than {rows} rows, expected one per node")
        for j, c in enumerate(batch.columns):
            out[at : at + batch.num_rows, j] = _numeric(c, path, dtype, nullable, first_row=at)
        at += batch.num_rows
    if rows is None:
        return np.concatenate(pieces) if pieces else np.zeros((0, 0), dtype=dtype)
    if at != rows:
        raise InputError(f"{path}: {at} rows, expected one per node ({rows})")
    return out if out is not None else np.zeros((0, 0), dtype=dtype)  # no rows, as expected


def _numeric(col, path: Path, dtype: type, nullable: bool = False, *, first_row: int = 0) -> np.ndarray:
    """A parsed column as ``dtype``. Integers: an empty, NA or NaN field is -1 where ``nullable`` (labels:
    unlabelled) and an error otherwise; a value that is not a whole number, infinite or beyond 64 bits is an
    error naming its row (``first_row``: the rows before this column's batch)."""
    import pyarrow as pa

    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_null(col.type)):
        raise InputError(f"{path}: non-numeric values ({col.type})")
    if not np.issubdtype(dtype, np.integer):
        return col.to_numpy(zero_copy_only=False).astype(dtype, copy=False)
    if pa.types.is_unsigned_integer(col.type) and col.null_count == 0:
        values = col.to_numpy(zero_copy_only=False)
        big = np.flatnonzero(values > np.iinfo(np.int64).max)
        if big.size:
            raise InputError(
                f"{path}: line {first_row + int(big[0]) + 1}: value {int(values[big[0]])} does not fit "
                "a 64-bit signed integer"
            )
        return values.astype(dtype)
    if col.null_count or pa.types.is_floating(col.type) or pa.types.is_null(col.type):
        values = col.to_numpy(zero_copy_only=False).astype(np.float64)
        empty = np.isnan(values)
        if not nullable and empty.any():
            raise InputError(
                f"{path}: line {first_row + int(np.argmax(empty)) + 1}: empty, NA or NaN where an integer is expected"
            )
        bad = np.flatnonzero(~empty & ((values != np.round(values)) | (np.abs(values) >= 2.0**63)))
        if bad.size:
            raise InputError(
                f"{path}: line {first_row + int(bad[0]) + 1}: value {values[bad[0]]} is not an integer of 64 bits"
            )
        return np.where(empty, -1, values).astype(dtype)  # empty or NaN: unlabelled
    return col.to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def _count(path: Path) -> int:
    values = _matrix(path, np.int64).reshape(-1)
    if values.shape[0] != 1:
        raise InputError(f"{path}: expected one count (one graph), found {values.shape[0]}")
    return check_count(int(values[0]), str(path))


def _count_dict(path: Path) -> dict[str, int]:
    import zlib

    import pyarrow as pa
    import pyarrow.csv as csv

    if not path.is_file():
        raise InputError(f"{path}: missing")
    try:
        table = csv.read_csv(path)
    except (pa.ArrowException, OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: not a readable CSV file ({exc})") from None
    if table.num_rows != 1:
        raise InputError(f"{path}: expected a header of node types and one row of counts")
    out = {}
    for name, col in zip(table.column_names, table.columns):
        check_path_name(name, f"{path}: node type", extra=SUFFIX_ROOM)
        if name in out:
            raise InputError(f"{path}: node type {name!r} is listed twice")
        out[name] = check_count(int(_numeric(col, path, np.int64)[0]), f"{path}: {name}")
    return out


def _edges(path: Path, n_src: int, n_dst: int) -> tuple[np.ndarray, np.ndarray]:
    e = _matrix(path, np.int64)
    if e.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if e.shape[1] != 2:
        raise InputError(f"{path}: expected src,dst per line, found {e.shape[1]} values")
    _check_nodes(path, e[:, 0], n_src, "source node")
    _check_nodes(path, e[:, 1], n_dst, "destination node")
    return np.ascontiguousarray(e[:, 0]), np.ascontiguousarray(e[:, 1])


def _check_nodes(path: Path, ids: np.ndarray, n: int, what: str) -> None:
    """An InputError naming the file and line of the first ID outside ``[0, n)``."""
    bad = np.flatnonzero((ids < 0) | (ids >= n))
    if bad.size:
        raise InputError(f"{path}: line {int(bad[0]) + 1}: {what} {int(ids[bad[0]])} out of range [0, {n})")


def _node_data(feat: Path, label: Path, n: int) -> dict[str, np.ndarray]:
    out = {}
    if feat.is_file():
        out["feat"] = _matrix(feat, np.float32, n)
    if label.is_file():
        y = _matrix(label, np.int64, n, nullable=True)
        if n and y.shape[1] != 1:
            raise InputError(f"{label}: expected one label per line, found {y.shape[1]} values")
        out["label"] = y.reshape(-1)
    return out


def _masks(split: Path, n: int) -> dict[str, np.ndarray]:
    masks = {}
    for name, key in SPLIT_FILES.items():
        path = split / f"{name}.csv.gz"
        if not path.is_file():
            continue
        idx = _matrix(path, np.int64)
        if idx.size and idx.shape[1] != 1:
            raise InputError(f"{path}: line 1: expected one node index per line, found {idx.shape[1]} values")
        idx = idx.reshape(-1)
        _check_nodes(path, idx, n, "node")
        mask = np.zeros(n, dtype=bool)
        mask[idx] = True
        masks[key] = mask
    return masks


def _classes(feats: dict[str, np.ndarray]) -> int | None:
    y = feats.get("label")
    return int(y.max()) + 1 if y is not None and y.size and y.max() >= 0 else None

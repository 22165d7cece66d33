"""The ID maps a prepare run writes (``id_maps/<type>/``: the user's ID and graphshard's, in graphshard's order),
read back and checked, and used: the user's IDs of graphshard's rows (``embed --id-map``), graphshard's IDs of
the user's (``serve --id-map``).

graphshard's ID of a node is the rank of the user's ID among its type's, so a map's IDs are sorted and a
look-up is a binary search (integers by value, strings by code point: the order the engines sort in).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import FormatError, InputError
from ..names import check_path_name

ROWS_PER_BATCH = 1 << 20


@dataclass(frozen=True)
class IDMap:
    """One node type's users' IDs, ``ids[n]`` the ID of graphshard's node ``n`` (sorted, unique)."""

    ntype: str
    ids: np.ndarray  # int64, or a fixed-width Unicode array

    @property
    def strings(self) -> bool:
        return self.ids.dtype.kind == "U"

    def lookup(self, values: list[object]) -> tuple[np.ndarray, int | None]:
        """graphshard's IDs of the users' ``values``, and the position of the first value the map lacks (or of
        the wrong kind), None when every one is there."""
        good = [isinstance(v, str) if self.strings else isinstance(v, int) and not isinstance(v, bool) for v in values]
        if not all(good):
            return np.zeros(0, np.int64), good.index(False)
        if not values:
            return np.zeros(0, np.int64), None
        if self.strings:
            asked = np.array(values, dtype=str)
        else:
            try:
                asked = np.array(values, dtype=np.int64)
            except OverflowError:
                return np.zeros(0, np.int64), next(i for i, v in enumerate(values) if not -(2**63) <= v < 2**63)  # type: ignore[operator]
        at = np.searchsorted(self.ids, asked)
        inside = at < self.ids.size
        found = inside.copy()
        found[inside] = self.ids[at[inside]] == asked[inside]
        if not found.all():
            return np.zeros(0, np.int64), int(np.argmax(~found))
        return at.astype(np.int64), None


def read_id_maps(prepared: str | os.PathLike) -> dict[str, IDMap]:
    """Every node type's ID map in a prepared directory.

    Raises:
        InputError: the directory holds no ID maps.
        FormatError: a map is damaged (not in graphshard's order, or its IDs not sorted and unique).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(prepared) / "id_maps"
    if not root.is_dir():
        raise InputError(f"{prepared}: no id_maps/ here; give the directory 'graphshard prepare --out' wrote")
    out = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        ntype = check_path_name(folder.name, f"{root}: node type")
        files = sorted(folder.glob("*.parquet"))  # prepare names them in ID order (write.write_sorted)
        try:
            table = pa.concat_tables([pq.read_table(p, columns=["id", "__gs_nid"]) for p in files])
        except Exception as exc:  # pyarrow raises several types for damaged files
            raise FormatError(f"{folder}: cannot read the ID map ({exc})") from None
        nid = table.column("__gs_nid").to_numpy()
        column = table.column("id")
        if pa.types.is_integer(column.type):
            ids = column.to_numpy().astype(np.int64)
        else:
            ids = np.array(column.to_pylist(), dtype=str)
        if (nid != np.arange(nid.size)).any() or (ids.size > 1 and not (ids[1:] > ids[:-1]).all()):
            raise FormatError(f"{folder}: the ID map is not in graphshard's order (damaged?)")
        out[ntype] = IDMap(ntype, ids)
    return out


def write_named_rows(rows_file: Path, id_map: IDMap, out: Path) -> None:
    """The rows of a ``.npy`` output (one per node, graphshard's order) as Parquet with the users' IDs: columns
    ``id`` and ``embedding`` (a fixed-size list of float32), written through a temporary file, in batches."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..format.npyfile import read_npy
    from ..format.staging import atomic_file

    rows = read_npy(rows_file, mmap=True)
    if rows.shape[0] != id_map.ids.size:
        raise InputError(
            f"{rows_file}: {rows.shape[0]} rows, but the ID map of {id_map.ntype!r} names {id_map.ids.size} nodes "
            "(another graph's map?)"
        )
    width = int(np.prod(rows.shape[1:])) if rows.ndim > 1 else 1
    schema = pa.schema(
        [("id", pa.string() if id_map.strings else pa.int64()), ("embedding", pa.list_(pa.float32(), width))]
    )
    with atomic_file(out) as tmp, pq.ParquetWriter(tmp, schema) as writer:
        for lo in range(0, rows.shape[0], ROWS_PER_BATCH):
            part = np.asarray(rows[lo : lo + ROWS_PER_BATCH], dtype=np.float32).reshape(-1, width)
            values = pa.FixedSizeListArray.from_arrays(pa.array(part.ravel()), width)
            ids = pa.array(id_map.ids[lo : lo + ROWS_PER_BATCH].tolist(), schema.field("id").type)
            writer.write_table(pa.table([ids, values], schema=schema))


def name_outputs(out: str | os.PathLike, prepared: str | os.PathLike) -> list[Path]:
    """Beside ``embed``'s output (``out``: a ``.npy`` file, or a directory of ``<type>.npy``), the same rows with
    the users' IDs: ``<out without .npy>.parquet``, or ``<type>.parquet`` in the directory. Returns the files.

    Raises:
        InputError: the output and the maps do not fit (another graph's maps, a type without a map).
    """
    maps, out = read_id_maps(prepared), Path(out)
    if out.is_dir():
        pairs = []
        for rows in sorted(out.glob("*.npy")):
            if rows.stem not in maps:
                raise InputError(f"{rows}: no ID map of node type {rows.stem!r} in {prepared}/id_maps")
            pairs.append((rows, maps[rows.stem], rows.with_suffix(".parquet")))
    else:
        if len(maps) != 1:
            raise InputError(
                f"{out} holds one node type's rows, but {prepared} maps {len(maps)} node types ({', '.join(maps)})"
            )
        pairs = [(out, next(iter(maps.values())), out.with_suffix(".parquet"))]
    for rows, id_map, target in pairs:
        write_named_rows(rows, id_map, target)
    return [p[2] for p in pairs]

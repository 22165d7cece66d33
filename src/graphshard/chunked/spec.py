"""``metadata.json`` of the chunked graph format: a typed model with one reader/writer pair.

Keys (as DGL documents them): ``graph_name``, ``node_type``, ``num_nodes_per_type`` (or the older
``num_nodes_per_chunk``), ``edge_type`` (canonical ``src:rel:dst``), ``num_edges_per_type`` (or
``num_edges_per_chunk``), ``edges``, ``node_data``, ``edge_data``. A file spec is
``{"format": {"name": "csv"|"numpy"|"parquet", "delimiter": " "}, "data": [paths]}``, paths relative to
the metadata file or absolute.
"""

from __future__ import annotations

import json
import os
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..format.inputs import require_dir
from ..format.jsonfile import read_json_object
from ..graph import EType, etype_str, parse_etype
from ..ids import IDConverter
from ..limits import check_count
from ..names import check_etype_names, check_path_name

FORMATS = ("csv", "numpy", "parquet")


@dataclass(frozen=True)
class FileSpec:
    """A list of chunk files of one format. ``where`` names the metadata key, for error messages; ``kind``
    says what their rows hold, so that a reader can say which line is not such a row."""

    format: str
    paths: tuple[Path, ...]
    delimiter: str = " "
    where: str = ""
    _: KW_ONLY
    kind: str = "data"  # "edges": two integer columns (source, destination); "data": numeric rows
    metadata: Path | None = field(default=None, compare=False)  # the metadata file that lists the chunks
    columns: tuple[str, ...] | None = None  # Parquet: the columns to read, in order (default: every column)
    matrix: bool = False  # Parquet: rows are vectors even of one column (a feature of width 1)

    @property
    def declared(self) -> str:
        """``where`` naming the metadata file by its full path, for messages that name no chunk file."""
        return f"{self.metadata.parent}{os.sep}{self.where}" if self.metadata is not None else self.where

    def to_json(self, root: Path) -> dict[str, Any]:
        fmt: dict[str, Any] = {"name": self.format}
        if self.format == "csv":
            fmt["delimiter"] = self.delimiter
        if self.columns is not None:
            fmt["columns"] = list(self.columns)
        if self.matrix:
            fmt["matrix"] = True
        return {"format": fmt, "data": [_relative(p, root) for p in self.paths]}


@dataclass(frozen=True)
class ChunkedMeta:
    """Contents of a chunked graph's ``metadata.json``; counts per type, optional per-chunk counts."""

    path: Path
    graph_name: str
    num_nodes: dict[str, int]
    num_edges: dict[EType, int]
    _: KW_ONLY
    edges: dict[EType, FileSpec]
    node_data: dict[str, dict[str, FileSpec]] = field(default_factory=dict)
    edge_data: dict[EType, dict[str, FileSpec]] = field(default_factory=dict)
    node_chunk_counts: dict[str, list[int]] | None = None
    edge_chunk_counts: dict[EType, list[int]] | None = None

    @property
    def ntypes(self) -> list[str]:
        return list(self.num_nodes)

    @property
    def etypes(self) -> list[EType]:
        return list(self.num_edges)

    @property
    def root(self) -> Path:
        return self.path.parent

    def id_converter(self) -> IDConverter:
        """Per-type ⇄ homogeneous ID conversion for this graph (types in metadata order)."""
        return IDConverter(self.num_nodes, {etype_str(e): n for e, n in self.num_edges.items()})

    def to_json(self) -> dict[str, Any]:
        root = self.root
        return {
            "graph_name": self.graph_name,
            "node_type": self.ntypes,
            "num_nodes_per_type": [self.num_nodes[t] for t in self.ntypes],
            "edge_type": [etype_str(e) for e in self.etypes],
            "num_edges_per_type": [self.num_edges[e] for e in self.etypes],
            "edges": {etype_str(e): s.to_json(root) for e, s in self.edges.items()},
            "node_data": {t: {k: s.to_json(root) for k, s in d.items()} for t, d in self.node_data.items()},
            "edge_data": {etype_str(e): {k: s.to_json(root) for k, s in d.items()} for e, d in self.edge_data.items()},
        }


def _relative(p: Path, root: Path) -> str:
    try:
        return str(p.relative_to(root))
    except ValueError:
        return str(p)


def write_metadata(meta: ChunkedMeta) -> None:
    """Write ``meta.path`` atomically (temporary file, then rename)."""
    tmp = meta.path.with_name(f".{meta.path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(meta.to_json(), indent=1) + "\n")
    os.replace(tmp, meta.path)


def read_metadata(path: str | os.PathLike) -> ChunkedMeta:
    """Read and validate ``metadata.json`` (or a directory holding it).

    Raises :class:`InputError` naming the file and key: missing keys, duplicate type names, malformed
    canonical edge types, unknown node types, count lists of the wrong length, unknown formats,
    missing chunk files.
    """
    path = Path(path)
    if not os.path.lexists(path):  # a typo: name the directory that is not there
        require_dir(path.parent if path.suffix == ".json" else path)
    if path.is_dir():
        path = path / "metadata.json"
    if not path.is_file():
        hint = ""
        if (path.parent / "meta.json").is_file():
            hint = (
                f" ({path.parent} is a dataset in the shared-data layout: write it in the chunked format "
                f"first with 'graphshard chunk --dataset {path.parent} --out CHUNKED_DIR')"
            )
        raise InputError(f"{path}: chunked graph metadata is missing{hint}")
    raw = read_json_object(path)
    r = _Reader(path.resolve(), raw)
    ntypes = r.names("node_type")
    etypes = [r.etype(e, ntypes) for e in r.names("edge_type")]
    num_nodes, node_chunks = r.counts("num_nodes_per_type", "num_nodes_per_chunk", ntypes)
    check_count(sum(num_nodes), f"{path}: 'num_nodes_per_type' (in all)")
    num_edges, edge_chunks = r.counts("num_edges_per_type", "num_edges_per_chunk", [etype_str(e) for e in etypes])
    edges_raw = r.section("edges", required=True)
    edges = {}
    for et in etypes:
        key = etype_str(et)
        if key not in edges_raw:
            raise InputError(f"{path}: 'edges' has no entry for edge type {key!r}")
        edges[et] = r.file_spec(edges_raw[key], f"edges[{key!r}]", "edges")
    extra = sorted(set(edges_raw) - {etype_str(e) for e in etypes})
    if extra:
        raise InputError(f"{path}: 'edges' names edge types not in 'edge_type': {extra}")
    node_data = {t: r.data_specs(d, "node_data", t) for t, d in r.section("node_data").items()}
    for t in node_data:
        if t not in ntypes:
            raise InputError(f"{path}: 'node_data' names unknown node type {t!r}")
    edge_data = {}
    for key, d in r.section("edge_data").items():
        et = r.etype(key, ntypes)
        if et not in etypes:
            raise InputError(f"{path}: 'edge_data' names unknown edge type {key!r}")
        edge_data[et] = r.data_specs(d, "edge_data", key)
    return ChunkedMeta(
        path=path.resolve(),
        graph_name=check_path_name(raw.get("graph_name", path.parent.name), f"{path}: graph_name"),
        num_nodes=dict(zip(ntypes, num_nodes)),
        num_edges=dict(zip(etypes, num_edges)),
        edges=edges,
        node_data=node_data,
        edge_data=edge_data,
        node_chunk_counts=dict(zip(ntypes, node_chunks)) if node_chunks else None,
        edge_chunk_counts=dict(zip(etypes, edge_chunks)) if edge_chunks else None,
    )


class _Reader:
    def __init__(self, path: Path, raw: Any):
        if not isinstance(raw, dict):
            raise InputError(f"{path}: top level must be a JSON object")
        self.path, self.raw = path, raw

    def get(self, key: str) -> Any:
        if key not in self.raw:
            raise InputError(f"{self.path}: missing key {key!r}")
        return self.raw[key]

    def names(self, key: str) -> list[str]:
        v = self.get(key)
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
            raise InputError(f"{self.path}: {key!r} must be a list of non-empty strings")
        for i, x in enumerate(v):
            if key == "node_type":
                check_path_name(x, f"{self.path}: {key}[{i}]")
        dup = sorted({x for x in v if v.count(x) > 1})
        if dup:
            raise InputError(f"{self.path}: {key!r} lists duplicate type names {dup}")
        return v

    def etype(self, text: str, ntypes: list[str]) -> EType:
        try:
            et = parse_etype(text)
        except InputError:
            raise InputError(
                f"{self.path}: malformed canonical edge type {text!r} (expected 'src:relation:dst')"
            ) from None
        check_etype_names(et, f"{self.path}: edge type")
        for t in (et[0], et[2]):
            if t not in ntypes:
                raise InputError(f"{self.path}: edge type {text!r} names unknown node type {t!r}")
        return et

    def counts(self, per_type: str, per_chunk: str, types: list[str]) -> tuple[list[int], list[list[int]] | None]:
        if per_type in self.raw:
            v, chunks = self.raw[per_type], None
            if not isinstance(v, list) or len(v) != len(types):
                raise InputError(f"{self.path}: {per_type!r} must list one count per type ({len(types)})")
        elif per_chunk in self.raw:
            chunks = self.raw[per_chunk]
            if (
                not isinstance(chunks, list)
                or len(chunks) != len(types)
                or not all(isinstance(c, list) for c in chunks)
            ):
                raise InputError(f"{self.path}: {per_chunk!r} must list, per type, the count of every chunk")
            v = [sum(x for x in c if isinstance(x, int)) for c in chunks]  # every x is checked below
        else:
            raise InputError(f"{self.path}: missing key {per_type!r} (or {per_chunk!r})")
        flat = v + [x for c in (chunks or []) for x in c]
        if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in flat):
            raise InputError(f"{self.path}: counts in {per_type!r}/{per_chunk!r} must be non-negative integers")
        return v, chunks

    def section(self, key: str, required: bool = False) -> dict[str, Any]:
        v = self.get(key) if required else self.raw.get(key, {})
        if not isinstance(v, dict):
            raise InputError(f"{self.path}: {key!r} must be an object")
        return v

    def file_spec(self, v: Any, where: str, kind: str = "data") -> FileSpec:
        if not isinstance(v, dict) or not isinstance(v.get("format"), dict) or not isinstance(v.get("data"), list):
            raise InputError(f"{self.path}: {where} must be {{'format': {{'name': ...}}, 'data': [paths]}}")
        name = v["format"].get("name")
        if name not in FORMATS:
            raise InputError(f"{self.path}: {where}: unknown format name {name!r} (expected one of {list(FORMATS)})")
        delimiter = v["format"].get("delimiter", " ")
        if name == "csv" and not (
            isinstance(delimiter, str)
            and len(delimiter) == 1
            and delimiter.isascii()
            and not delimiter.isalnum()
            and delimiter not in '\r\n"+-.'
        ):
            raise InputError(
                f"{self.path}: {where}: format delimiter must be one character that separates numbers "
                f"(' ', ',', '\\t', ';', '|', ...), got {delimiter!r}"
            )
        columns = v["format"].get("columns")
        if columns is not None and (
            name != "parquet"
            or not isinstance(columns, list)
            or not columns
            or not all(isinstance(c, str) and c for c in columns)
        ):
            raise InputError(f"{self.path}: {where}: format columns must be a non-empty list of Parquet column names")
        matrix = v["format"].get("matrix", False)
        if not isinstance(matrix, bool) or (matrix and name != "parquet"):
            raise InputError(f"{self.path}: {where}: format matrix must be true or false (Parquet only)")
        paths = []
        for i, p in enumerate(v["data"]):
            if not isinstance(p, str) or not p:
                raise InputError(f"{self.path}: {where}: data[{i}] must be a file path (a string), got {p!r}")
            full = Path(p) if os.path.isabs(p) else self.path.parent / p
            try:
                found = full.is_file()
            except OSError as exc:  # a name too long for the file system, ...
                raise InputError(
                    f"{self.path}: {where}: chunk file {full} cannot be read ({exc.strerror or exc})"
                ) from None
            if not found:
                raise InputError(f"{self.path}: {where}: chunk file {full} is missing")
            paths.append(full)
        return FileSpec(
            name,
            tuple(paths),
            delimiter if name == "csv" else " ",
            f"{self.path.name} {where}",
            kind=kind,
            metadata=self.path,
            columns=tuple(columns) if columns else None,
            matrix=matrix,
        )

    def data_specs(self, v: Any, section: str, type_name: str) -> dict[str, FileSpec]:
        if not isinstance(v, dict):
            raise InputError(f"{self.path}: {section}[{type_name!r}] must map feature names to file specs")
        for k in v:
            check_path_name(k, f"{self.path}: {section}[{type_name!r}] feature")
        return {k: self.file_spec(s, f"{section}[{type_name!r}][{k!r}]") for k, s in v.items()}

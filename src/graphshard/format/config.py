"""The partition configuration JSON (``<graph_name>.json``): a typed model, its reader and writer."""

from __future__ import annotations

import builtins
import hashlib
import json
import os
import re
from dataclasses import KW_ONLY, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormatError, InputError
from ..names import check_path_name
from .tensorfile import dtype_code

FORMAT_NAME = "graphshard"
FORMAT_VERSION = 1
PART_FILES = ("part_graph", "node_feats", "edge_feats")
FEATURE_FILES = ("node_feats", "edge_feats")
Schema = dict[str, dict[str, tuple[str, tuple[int, ...]]]]  # file kind -> feature key -> (dtype code, row shape)
_NAME_RE = re.compile(r"^[A-Za-z0-9_]+$")


# bytes of the longest file name built from a graph name: ".staging-<name>-<pid>", ".<name>.json.tmp-<pid>"
_GRAPH_NAME_ROOM = 24


def check_graph_name(name: str) -> None:
    """Graph names are letters, digits and underscores (they become file names), short enough for the
    file names built from them."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InputError(f"graph name {name!r} must be non-empty and use only letters, digits and underscores")
    check_path_name(name, "graph name", extra=_GRAPH_NAME_ROOM)


def check_type_names(
    path: Path, ntypes: dict[str, int], etypes: dict[str, int], error: type[Exception] = FormatError
) -> None:
    """Node type names and each part of ``src:rel:dst`` edge type names are plain path names (they name
    files such as per-type embeddings); errors name ``path`` and the key."""
    for t in ntypes:
        check_path_name(t, f"{path}: ntypes", error)
    for et in etypes:
        for part in et.split(":"):
            check_path_name(part, f"{path}: etypes ({et!r})", error)


@dataclass(frozen=True)
class PartitionConfig:
    """Contents of ``<graph_name>.json``. ``node_map[t]``/``edge_map[t]`` are (P, 2) int64 arrays."""

    path: Path
    graph_name: str
    part_method: str
    num_parts: int
    _: KW_ONLY
    halo_hops: int
    num_nodes: int
    num_edges: int
    ntypes: dict[str, int]
    etypes: dict[str, int]
    node_map: dict[str, np.ndarray]
    edge_map: dict[str, np.ndarray]
    parts: list[dict[str, str]]
    checksums: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    feature_schema: Schema = field(default_factory=lambda: {k: {} for k in FEATURE_FILES})
    run_fingerprint: str = ""
    num_classes: int | None = None  # the dataset's class count, when it declares one (labels are checked against it)

    def identity(self, part_id: int, kind: str) -> dict[str, str]:
        """The metadata every file of partition ``part_id`` carries (``kind``: ``part_graph``, ``node_feats``, ...)."""
        return {
            "graph_name": self.graph_name,
            "part_id": str(part_id),
            "kind": kind,
            "run_fingerprint": self.run_fingerprint,
        }

    def with_fingerprint(self) -> PartitionConfig:
        """This config with :attr:`run_fingerprint` computed from its ID space (see :func:`run_fingerprint`)."""
        return replace(self, run_fingerprint=run_fingerprint(self))

    @property
    def root(self) -> Path:
        return self.path.parent

    def part_path(self, part_id: int, key: str) -> Path:
        """Absolute path of file ``key`` (``part_graph``, ``node_feats``, ...) of partition ``part_id``."""
        return self.root / self.parts[part_id][key]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "graph_name": self.graph_name,
            "part_method": self.part_method,
            "num_parts": self.num_parts,
            "halo_hops": self.halo_hops,
            "num_nodes": self.num_nodes,
            "num_edges": self.num_edges,
            "ntypes": self.ntypes,
            "etypes": self.etypes,
            "node_map": {k: v.tolist() for k, v in self.node_map.items()},
            "edge_map": {k: v.tolist() for k, v in self.edge_map.items()},
        }
        for i, entry in enumerate(self.parts):
            out[f"part-{i}"] = entry
        out.update(self.extra)
        out["feature_schema"] = _schema_json(self.feature_schema)
        if self.run_fingerprint:
            out["run_fingerprint"] = self.run_fingerprint
        if self.num_classes is not None:
            out["num_classes"] = self.num_classes
        out["checksums"] = self.checksums
        return out


def feature_schema(
    node: dict[str, tuple[Any, tuple[int, ...]]], edge: dict[str, tuple[Any, tuple[int, ...]]]
) -> Schema:
    """A config's ``feature_schema`` from ``{"<type>/<name>": (NumPy dtype, row shape)}`` of node and edge
    features; raises :class:`InputError` naming a feature whose dtype the files cannot store."""
    out: Schema = {}
    for kind, feats in zip(FEATURE_FILES, (node, edge)):
        out[kind] = {}
        for key, (dtype, row_shape) in feats.items():
            code = dtype_code(dtype)
            if code is None:
                raise InputError(
                    f"feature {key!r} has dtype {np.dtype(dtype)}, which partition files cannot store "
                    "(use a bool, integer or float dtype)"
                )
            out[kind][key] = (code, tuple(int(d) for d in row_shape))
    return out


def _schema_json(schema: Schema) -> dict[str, dict[str, dict[str, Any]]]:
    return {
        kind: {k: {"dtype": d, "shape": list(s)} for k, (d, s) in sorted(schema.get(kind, {}).items())}
        for kind in FEATURE_FILES
    }


def run_fingerprint(cfg: PartitionConfig) -> str:
    """sha256 over what a run fixes before writing any file: graph name, parts, HALO depth, counts, types,
    ID maps and the feature schema (names, dtypes, row shapes) -- not the method name, time or process.

    Deterministic (the same input, options and seed give the same value, whichever pipeline wrote the
    files), so files of different runs or partitions can be told apart without breaking byte equality.
    """
    key = {
        "graph_name": cfg.graph_name,
        "num_parts": cfg.num_parts,
        "halo_hops": cfg.halo_hops,
        "num_nodes": cfg.num_nodes,
        "num_edges": cfg.num_edges,
        "ntypes": cfg.ntypes,
        "etypes": cfg.etypes,
        "node_map": {k: v.tolist() for k, v in cfg.node_map.items()},
        "edge_map": {k: v.tolist() for k, v in cfg.edge_map.items()},
        "feature_schema": _schema_json(cfg.feature_schema),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def write_config(cfg: PartitionConfig) -> None:
    """Write the JSON atomically (temporary file, fsync, rename, directory fsync)."""
    tmp = cfg.path.with_name(f".{cfg.path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w") as f:
            json.dump(cfg.to_json(), f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, cfg.path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fd = os.open(cfg.path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_KNOWN = {
    "format",
    "format_version",
    "graph_name",
    "part_method",
    "num_parts",
    "halo_hops",
    "num_nodes",
    "num_edges",
    "ntypes",
    "etypes",
    "node_map",
    "edge_map",
    "checksums",
    "run_fingerprint",
    "feature_schema",
    "num_classes",
}


def as_config(config: str | os.PathLike | PartitionConfig) -> PartitionConfig:
    """``config`` itself when already loaded, else :func:`read_config` of the path: a run reads its config once
    and passes the object down."""
    return config if isinstance(config, PartitionConfig) else read_config(config)


def read_config(path: str | os.PathLike) -> PartitionConfig:
    """Read and validate ``<graph_name>.json``; raises :class:`FormatError` naming the file and key at fault."""
    path = Path(path).resolve()
    if not path.is_file():
        raise FormatError(f"{path}: partition config file is missing")
    try:
        raw = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise FormatError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise FormatError(f"{path}: not a partition config (JSON nested too deeply)") from None
    r = _Reader(path, raw)
    if raw.get("format", FORMAT_NAME) != FORMAT_NAME or r.int("format_version") != FORMAT_VERSION:
        raise FormatError(f"{path}: unsupported format {raw.get('format')!r} version {raw.get('format_version')!r}")
    num_parts = r.int("num_parts", 1)
    ntypes, etypes = r.type_ids("ntypes"), r.type_ids("etypes")
    check_type_names(path, ntypes, etypes)
    cfg = PartitionConfig(
        path=path,
        graph_name=check_path_name(r.str("graph_name"), f"{path}: graph_name", FormatError),
        part_method=r.str("part_method"),
        num_parts=num_parts,
        halo_hops=r.int("halo_hops", 1),
        num_nodes=r.int("num_nodes", 0),
        num_edges=r.int("num_edges", 0),
        ntypes=ntypes,
        etypes=etypes,
        node_map=r.ranges("node_map", list(ntypes), num_parts),
        edge_map=r.ranges("edge_map", list(etypes), num_parts),
        parts=[r.part(i) for i in range(num_parts)],
        checksums=r.checksums(),
        feature_schema=r.schema(),
        run_fingerprint=r.str("run_fingerprint", _NO_IDENTITY),
        num_classes=r.int("num_classes", 1) if "num_classes" in raw else None,
        extra={k: v for k, v in raw.items() if k not in _KNOWN and not k.startswith("part-")},
    )
    _check_tiling(path, "node_map", cfg.node_map, list(ntypes), total=cfg.num_nodes, num_parts=num_parts)
    _check_tiling(path, "edge_map", cfg.edge_map, list(etypes), total=cfg.num_edges, num_parts=num_parts)
    if cfg.run_fingerprint != run_fingerprint(cfg):
        raise FormatError(
            f"{path}: graph_name, num_parts, halo_hops, counts, types, ID maps or feature_schema were "
            "changed after the partitions were written (they no longer match 'run_fingerprint')"
        )
    return cfg


_NO_IDENTITY = (
    "written before graphshard recorded which run wrote each file, or by another tool, so its files "
    "cannot be told from another run's: re-partition the graph"
)


class _Reader:
    """Typed access to the raw JSON with errors naming the key."""

    def __init__(self, path: Path, raw: Any):
        if not isinstance(raw, dict):
            raise FormatError(f"{path}: top level must be a JSON object")
        self.path, self.raw = path, raw

    def get(self, key: str) -> Any:
        if key not in self.raw:
            raise FormatError(f"{self.path}: missing key {key!r}")
        return self.raw[key]

    def int(self, key: str, minimum: int | None = None) -> int:
        v = self.get(key)
        if (
            isinstance(v, bool)
            or not isinstance(v, int)
            or (minimum is not None and v < minimum)
            or not -(2**63) <= v < 2**63
        ):
            raise FormatError(f"{self.path}: key {key!r} must be an integer >= {minimum}, got {v!r}")
        return v

    def str(self, key: str, why_needed: str = "") -> str:
        if why_needed and key not in self.raw:
            raise FormatError(f"{self.path}: missing key {key!r}: {why_needed}")
        v = self.get(key)
        if not isinstance(v, str):
            raise FormatError(f"{self.path}: key {key!r} must be a string, got {v!r}")
        return v

    def schema(self) -> Schema:
        v = self.get("feature_schema")
        bad = FormatError(
            f"{self.path}: key 'feature_schema' must map {list(FEATURE_FILES)} to "
            '{"<type>/<name>": {"dtype": "<code>", "shape": [row dims]}}'
        )
        if not isinstance(v, dict) or set(v) != set(FEATURE_FILES):
            raise bad
        out: Schema = {}
        for kind in FEATURE_FILES:
            if not isinstance(v[kind], dict):
                raise bad
            out[kind] = {}
            for name, spec in v[kind].items():
                shape = spec.get("shape") if isinstance(spec, dict) else None
                if (
                    not isinstance(spec, dict)
                    or not isinstance(spec.get("dtype"), str)
                    or not isinstance(shape, list)
                    or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**63 for d in shape)
                ):
                    raise FormatError(
                        f"{self.path}: feature_schema[{kind!r}][{name!r}] must be "
                        '{"dtype": "<code>", "shape": [non-negative row dims]}'
                    )
                out[kind][name] = (spec["dtype"], tuple(shape))
        return out

    # from here on, str and int name the methods above: the types are builtins.str and builtins.int
    def type_ids(self, key: builtins.str) -> dict[builtins.str, builtins.int]:
        v = self.get(key)
        if (
            not isinstance(v, dict)
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in v.values())
            or sorted(v.values()) != list(range(len(v)))
        ):
            raise FormatError(
                f"{self.path}: key {key!r} must map type names to IDs 0..{len(v) - 1 if isinstance(v, dict) else '?'}"
            )
        return dict(sorted(v.items(), key=lambda kv: kv[1]))

    def ranges(
        self, key: builtins.str, types: list[builtins.str], num_parts: builtins.int
    ) -> dict[builtins.str, np.ndarray]:
        v = self.get(key)
        if not isinstance(v, dict) or set(v) != set(types):
            got = sorted(v) if isinstance(v, dict) else v
            raise FormatError(f"{self.path}: key {key!r} must have one entry per type {types}, got {got!r}")
        out = {}
        for t in types:
            try:
                arr = np.asarray(v[t], dtype=np.int64)
            except (TypeError, ValueError, OverflowError):
                raise FormatError(
                    f"{self.path}: {key}[{t!r}] must be a list of [start, end] pairs of 64-bit integers"
                ) from None
            if arr.shape != (num_parts, 2) or (arr[:, 1] < arr[:, 0]).any() or (arr < 0).any():
                raise FormatError(
                    f"{self.path}: {key}[{t!r}] must hold {num_parts} [start, end] pairs with start <= end"
                )
            out[t] = arr
        return out

    def part(self, i: builtins.int) -> dict[builtins.str, builtins.str]:
        entry = self.get(f"part-{i}")
        if not isinstance(entry, dict) or any(not isinstance(entry.get(k), str) for k in PART_FILES):
            raise FormatError(f"{self.path}: key 'part-{i}' must name {list(PART_FILES)} as relative paths")
        return dict(entry)

    def checksums(self) -> dict[builtins.str, builtins.str]:
        v = self.raw.get("checksums", {})
        if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
            raise FormatError(f"{self.path}: key 'checksums' must map file paths to sha256 hex strings")
        for rel in v:  # a relative path inside the partition directory: never absolute, never '..'
            for part in rel.split("/"):
                check_path_name(part, f"{self.path}: key 'checksums' file {rel!r}", FormatError)
        return v


def _check_tiling(
    path: Path, key: str, ranges: dict[str, np.ndarray], types: list[str], *, total: int, num_parts: int
) -> None:
    """Ranges ordered partition-major, type-minor must tile ``[0, total)`` without gaps or overlaps."""
    expected = 0
    for p in range(num_parts):
        for t in types:
            start, end = (int(x) for x in ranges[t][p])
            if start != expected:
                raise FormatError(
                    f"{path}: {key}[{t!r}][{p}] starts at {start}, expected {expected} "
                    "(ranges must tile the ID space partition-major, type-minor)"
                )
            expected = end
    if expected != total:
        raise FormatError(f"{path}: {key} covers {expected} IDs but the graph has {total}")

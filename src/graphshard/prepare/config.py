"""The ``graphshard prepare`` config: which tables hold which nodes and edges, and what becomes of their columns.

Read from YAML or JSON into small frozen dataclasses; every mistake is one :class:`InputError` line naming the
file and the key (``nodes[0].features[1].transform``), with the closest known word for a misspelt one. Table
paths (files or globs) are relative to the config file's directory and must match files; the tables' columns
are checked later, against the tables themselves (:mod:`graphshard.prepare.checks`).
"""

from __future__ import annotations

import difflib
import glob
import os
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..format.textconfig import read_config_text, shown
from ..graph import EType
from ..names import check_etype_names, check_path_name

NUMERIC = ("none", "min_max", "standard", "rank_gauss", "bucket")
TRANSFORMS = (*NUMERIC, "categorical", "multi_categorical")
IMPUTERS = ("mean", "median", "most_frequent", "zero", "none")
LABEL_KINDS = ("classification", "regression", "multi_label")
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".gz": "csv"}
DEFAULT_FEATURE = "feat"
RESERVED = ("label", "train_mask", "val_mask", "test_mask")
MAX_CATEGORIES = 4096


@dataclass(frozen=True)
class Feature:
    """One column made into (part of) a feature: ``transform`` fitted to the column, written into ``name``
    (features of one name are concatenated in the config's order)."""

    column: str
    transform: str
    name: str = DEFAULT_FEATURE
    imputer: str = "mean"  # numeric transforms: what fills a missing value (null or NaN)
    _: KW_ONLY
    buckets: tuple[float, ...] = ()  # bucket: ascending bounds; value x falls in bucket #{b <= x}
    output: str = "onehot"  # categorical: one-hot columns, or the category's index (an integer feature)
    separator: str | None = None  # multi_categorical from a string column: what separates its categories


@dataclass(frozen=True)
class Split:
    """How labelled rows are split into train/val/test: seeded ``fractions``, a ``column`` holding
    ``train``/``val``/``test``, or ``fractions`` taken in the order of a ``time`` column."""

    fractions: tuple[float, float, float] | None = (0.8, 0.1, 0.1)
    column: str | None = None
    time: str | None = None
    seed: int = 0


@dataclass(frozen=True)
class Label:
    """The column a task learns: its ``kind``, how its rows split, whether rows without one are allowed."""

    column: str
    kind: str
    split: Split
    separator: str | None = None  # multi_label from a string column
    _: KW_ONLY
    allow_missing: bool = False  # rows without a label are left out of every split (else: an error)


@dataclass(frozen=True)
class Table:
    """Where a table's rows are: files (sorted, globs expanded), their format, the CSV delimiter."""

    files: tuple[Path, ...]
    format: str
    delimiter: str = ","
    where: str = ""  # the config key, for messages

    def describe(self) -> str:
        first = self.files[0]
        return f"{first}" if len(self.files) == 1 else f"{first.parent}/ ({len(self.files)} files)"


@dataclass(frozen=True)
class NodeSpec:
    type: str
    table: Table
    id: str
    features: tuple[Feature, ...] = ()
    _: KW_ONLY
    label: Label | None = None


@dataclass(frozen=True)
class EdgeSpec:
    type: EType
    table: Table
    source: str
    destination: str
    _: KW_ONLY
    features: tuple[Feature, ...] = ()
    label: Label | None = None
    reverse: bool = False

    @property
    def reverse_type(self) -> EType:
        return (self.type[2], f"rev_{self.type[1]}", self.type[0])


@dataclass(frozen=True)
class PrepareConfig:
    path: Path
    graph_name: str
    nodes: tuple[NodeSpec, ...]
    edges: tuple[EdgeSpec, ...]

    @property
    def ntypes(self) -> list[str]:
        """Node types: those with a table first (config order), then those only edges name (sorted)."""
        named = [n.type for n in self.nodes]
        rest = sorted({t for e in self.edges for t in (e.type[0], e.type[2])} - set(named))
        return named + rest

    @property
    def etypes(self) -> list[EType]:
        return [t for e in self.edges for t in ([e.type, e.reverse_type] if e.reverse else [e.type])]


def read_prepare_config(path: str | os.PathLike) -> PrepareConfig:
    """Read and validate a prepare config (``.yaml``, ``.yml`` or ``.json``).

    Args:
        path: the config file.

    Returns:
        The config, table globs expanded into sorted file lists.

    Raises:
        InputError: the file cannot be read, or a key is missing, unknown or holds a bad value (named).
    """
    path = Path(path)
    raw = read_config_text(path, "prepare config")
    r = _Keys(path, raw, "", {"graph_name", "nodes", "edges"})
    nodes = tuple(_node(r.child(v, f"nodes[{i}]")) for i, v in enumerate(r.list("nodes", required=False)))
    edges = tuple(_edge(r.child(v, f"edges[{i}]")) for i, v in enumerate(r.list("edges", required=True)))
    if not edges:
        raise InputError(f"{path}: 'edges' lists no edge table; a graph needs at least one")
    name = r.get("graph_name", default=path.stem)
    cfg = PrepareConfig(path, check_path_name(name, f"{path}: graph_name"), nodes, edges)
    _check_types(cfg)
    return cfg


class _Keys:
    """One mapping of the config, with the key path that names it in messages."""

    def __init__(self, path: Path, raw: Any, where: str, known: set[str]):
        self.path, self.raw, self.where = path, raw, where
        if not isinstance(raw, dict):
            raise InputError(f"{path}: {where or 'the top level'} must be a mapping, not {shown(raw)}")
        for key in raw:
            if key not in known:
                close = difflib.get_close_matches(str(key), sorted(known), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(sorted(known))})"
                raise InputError(f"{path}: {self.key(str(key))}: unknown key{hint}")

    def key(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def fail(self, name: str, why: str) -> InputError:
        return InputError(f"{self.path}: {self.key(name)}: {why}")

    def get(self, name: str, default: Any = None, required: bool = False) -> Any:
        if name not in self.raw or self.raw[name] is None:
            if required:
                raise self.fail(name, "missing")
            return default
        return self.raw[name]

    def text(self, name: str, default: str | None = None, required: bool = False) -> Any:
        v = self.get(name, default, required)
        if v is not None and (not isinstance(v, str) or not v):
            raise self.fail(name, f"must be a non-empty string, not {shown(v)}")
        return v

    def choice(self, name: str, options: tuple[str, ...], default: str | None = None) -> str:
        v = self.text(name, default, required=default is None)
        if v not in options:
            close = difflib.get_close_matches(v, options, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise self.fail(name, f"{shown(v)} is not one of: {', '.join(options)}{hint}")
        return v

    def list(self, name: str, required: bool = False) -> list[Any]:
        v = self.get(name, [], required)
        if not isinstance(v, list):
            raise self.fail(name, f"must be a list, not {shown(v)}")
        return v

    def flag(self, name: str) -> bool:
        v = self.get(name, False)
        if not isinstance(v, bool):
            raise self.fail(name, f"must be true or false, not {shown(v)}")
        return v

    def child(self, raw: Any, where: str, known: set[str] | None = None) -> _Keys:
        full = f"{self.where}.{where}" if self.where else where
        return _Keys(self.path, raw, full, known if known is not None else _KNOWN[where.split("[")[0]])


_TABLE = {"path", "format", "delimiter"}
_KNOWN = {
    "nodes": {"type", "id", "features", "label", *_TABLE},
    "edges": {"type", "source", "destination", "features", "label", "reverse", *_TABLE},
    "features": {"column", "transform", "name", "imputer", "buckets", "output", "separator"},
    "label": {"column", "kind", "split", "separator", "allow_missing"},
    "split": {"fractions", "column", "time", "seed"},
}


def _table(r: _Keys) -> Table:
    pattern = r.text("path", required=True)
    full = pattern if os.path.isabs(pattern) else str(r.path.parent / pattern)
    files = sorted(Path(p) for p in glob.glob(full) if Path(p).is_file())
    if not files:
        raise r.fail("path", f"{full} matches no file")
    given = r.get("format")
    if given is not None:
        fmt = r.choice("format", ("parquet", "csv"))
    else:
        found = {FORMATS.get(p.suffix.lower()) for p in files}
        if None in found or len(found) != 1:
            raise r.fail("path", "cannot tell the format from the file names (.parquet or .csv): set 'format'")
        fmt = found.pop() or "parquet"
    delimiter = r.text("delimiter", ",")
    if len(delimiter) != 1:
        raise r.fail("delimiter", f"must be one character, not {shown(delimiter)}")
    return Table(tuple(files), fmt, delimiter, r.where)


def _node(r: _Keys) -> NodeSpec:
    ntype = check_path_name(r.text("type", required=True), f"{r.path}: {r.key('type')}")
    return NodeSpec(ntype, _table(r), r.text("id", required=True), _features(r), label=_label(r))


def _edge(r: _Keys) -> EdgeSpec:
    raw = r.get("type", required=True)
    if not (isinstance(raw, list) and len(raw) == 3 and all(isinstance(x, str) and x for x in raw)):
        raise r.fail("type", f"must be [source type, relation, destination type], not {shown(raw)}")
    etype = (raw[0], raw[1], raw[2])
    check_etype_names(etype, f"{r.path}: {r.key('type')}")
    return EdgeSpec(
        etype,
        _table(r),
        r.text("source", required=True),
        r.text("destination", required=True),
        features=_features(r),
        label=_label(r),
        reverse=r.flag("reverse"),
    )


def _features(r: _Keys) -> tuple[Feature, ...]:
    out = []
    for i, raw in enumerate(r.list("features")):
        f = r.child(raw, f"features[{i}]")
        transform = f.choice("transform", TRANSFORMS)
        index = transform == "categorical" and f.choice("output", ("onehot", "index"), "onehot") == "index"
        column = f.text("column", required=True)
        name = check_path_name(f.text("name", column if index else DEFAULT_FEATURE), f"{r.path}: {f.key('name')}")
        if name in RESERVED:
            raise f.fail("name", f"{name!r} is the name of the label or a split; choose another")
        out.append(
            Feature(
                column,
                transform,
                name,
                f.choice("imputer", IMPUTERS, "mean"),
                buckets=_buckets(f) if transform == "bucket" else (),
                output="index" if index else "onehot",
                separator=f.text("separator"),
            )
        )
    _check_names(r, out)
    return tuple(out)


def _buckets(f: _Keys) -> tuple[float, ...]:
    b = f.get("buckets", required=True)
    ok = isinstance(b, list) and b and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in b)
    if not ok or any(x >= y for x, y in zip(b, b[1:])):
        raise f.fail("buckets", f"must be a non-empty ascending list of numbers (the bounds), not {shown(b)}")
    return tuple(float(x) for x in b)


def _check_names(r: _Keys, features: list[Feature]) -> None:
    """An index (integer) feature has a name of its own: numbers of other columns cannot join it."""
    for i, f in enumerate(features):
        for other in features[:i]:
            if other.name == f.name and "index" in (f.output, other.output):
                raise r.fail(
                    f"features[{i}].name",
                    f"{f.name!r} also names the features of column {other.column!r}; a categorical index is "
                    "an integer feature of its own name",
                )


def _label(r: _Keys) -> Label | None:
    raw = r.get("label")
    if raw is None:
        return None
    lab = r.child(raw, "label")
    return Label(
        lab.text("column", required=True),
        lab.choice("kind", LABEL_KINDS),
        _split(lab),
        lab.text("separator"),
        allow_missing=lab.flag("allow_missing"),
    )


def _split(lab: _Keys) -> Split:
    raw = lab.get("split", [0.8, 0.1, 0.1])
    if isinstance(raw, list):
        return Split(_fractions(lab, "split", raw))
    s = lab.child(raw, "split", _KNOWN["split"])
    column, time = s.text("column"), s.text("time")
    if column and time:
        raise s.fail("column", "split by a column or by a time column, not both")
    seed = s.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise s.fail("seed", f"must be a non-negative integer, not {shown(seed)}")
    fractions = None if column else _fractions(s, "fractions", s.get("fractions", [0.8, 0.1, 0.1]))
    return Split(fractions, column, time, seed)


def _fractions(r: _Keys, key: str, v: Any) -> tuple[float, float, float]:
    ok = isinstance(v, list) and len(v) == 3 and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
    if not ok or any(x < 0 for x in v) or not 0 < sum(v) <= 1 + 1e-9:
        raise r.fail(key, f"must be three fractions (train, val, test) >= 0 summing to at most 1, not {shown(v)}")
    return (float(v[0]), float(v[1]), float(v[2]))


def _check_types(cfg: PrepareConfig) -> None:
    seen: set[str] = set()
    for i, n in enumerate(cfg.nodes):
        if n.type in seen:
            raise InputError(f"{cfg.path}: nodes[{i}].type: node type {n.type!r} has two tables; give it one")
        seen.add(n.type)
    etypes = cfg.etypes
    for e in set(etypes):
        if etypes.count(e) > 1:
            raise InputError(f"{cfg.path}: edges: edge type {':'.join(e)} is listed twice (a reverse counts)")

"""Bad input named before anything is written: missing columns, columns whose type does not fit their use,
missing or duplicate node IDs, edges naming nodes their node table lacks (``--on-dangling``). Each error is one
line naming the table, the column and a sample of the rows at fault."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..errors import InputError
from .config import NUMERIC, EdgeSpec, Feature, Label, NodeSpec, PrepareConfig, Table
from .engine import Column, Engine

log = logging.getLogger("graphshard.prepare")
SAMPLE = 5  # rows named in a message


@dataclass(frozen=True)
class Source:
    """A registered table: its relation name, its config, its columns."""

    relation: str
    table: Table
    columns: dict[str, Column]

    def column(self, name: str, what: str) -> Column:
        if name not in self.columns:
            have = ", ".join(list(self.columns)[:12])
            raise InputError(
                f"{self.table.describe()} ({self.table.where}): no column {name!r} for {what} (columns: {have})"
            )
        return self.columns[name]

    def fail(self, column: str, why: str) -> InputError:
        return InputError(f"{self.table.describe()} ({self.table.where}), column {column!r}: {why}")


def sample_text(values: list[object]) -> str:
    shown = ", ".join(repr(v) for v in values[:SAMPLE])
    return shown + (", ..." if len(values) > SAMPLE else "")


def check_feature(src: Source, f: Feature) -> Column:
    """The column of ``f``, if its kind fits the transform."""
    col = src.column(f.column, f"a feature ({f.transform})")
    numeric = col.kind in ("int", "float", "bool")
    if f.transform == "none" and col.kind == "list" and col.element in ("int", "float", "bool"):
        return col  # a vector, as it is
    if f.transform in NUMERIC and not numeric:
        raise src.fail(f.column, f"transform {f.transform!r} needs numbers, the column holds {col.type}")
    if f.transform == "categorical" and col.kind not in ("int", "string", "bool"):
        raise src.fail(f.column, f"transform 'categorical' needs strings or integers, the column holds {col.type}")
    if f.transform == "multi_categorical":
        _check_multi(src, f.column, col, f.separator, what="transform 'multi_categorical'")
    return col


def _check_multi(src: Source, name: str, col: Column, separator: str | None, *, what: str) -> None:
    if col.kind == "list" and col.element in ("int", "string", "bool"):
        return
    if col.kind == "string" and separator:
        return
    if col.kind == "string":
        raise src.fail(name, f"{what} of a string column needs 'separator' (what separates its values)")
    raise src.fail(
        name, f"{what} needs a list of strings or integers, or strings with a separator; it holds {col.type}"
    )


def check_label(src: Source, label: Label) -> Column:
    col = src.column(label.column, f"the label ({label.kind})")
    if label.kind == "classification" and col.kind not in ("int", "string", "bool"):
        raise src.fail(label.column, f"a classification label is a class (string or integer), not {col.type}")
    if label.kind == "regression" and col.kind not in ("int", "float"):
        raise src.fail(label.column, f"a regression label is a number, not {col.type}")
    if label.kind == "multi_label":
        _check_multi(src, label.column, col, label.separator, what="a multi_label label")
    split = label.split
    if split.column and src.column(split.column, "the split").kind != "string":
        raise src.fail(split.column, "a split column holds the strings train, val and test")
    if split.time and src.column(split.time, "the time split").kind not in ("int", "float", "time"):
        raise src.fail(split.time, "a time split needs numbers, dates or timestamps")
    return col


def id_kind(src: Source, name: str, what: str) -> str:
    """``int`` or ``string``: the kind of an ID column."""
    col = src.column(name, what)
    if col.kind not in ("int", "string"):
        raise src.fail(name, f"{what} must hold integers or strings, not {col.type}")
    return col.kind


def check_id_kinds(cfg: PrepareConfig, nodes: dict[str, Source], edges: list[Source]) -> dict[str, str]:
    """Every node type's ID kind; the edge columns that name it must be of the same kind."""
    kinds = {n.type: id_kind(nodes[n.type], n.id, "the node ID") for n in cfg.nodes}
    for spec, src in zip(cfg.edges, edges):
        for name, ntype in ((spec.source, spec.type[0]), (spec.destination, spec.type[2])):
            kind = id_kind(src, name, f"IDs of {ntype!r} nodes")
            if kinds.setdefault(ntype, kind) != kind:
                raise src.fail(
                    name,
                    f"holds {kind} IDs of {ntype!r} nodes, but their node table's IDs are {kinds[ntype]}s: "
                    "store both as the same type",
                )
    return kinds


def check_node_ids(engine: Engine, spec: NodeSpec, src: Source) -> None:
    """No missing and no duplicate IDs in a node table."""
    q, rel = engine.dialect.ident, engine.dialect.ident(src.relation)
    col = q(spec.id)
    missing = engine.rows(f"SELECT COUNT(*) FROM {rel} WHERE {col} IS NULL")[0][0]
    if missing:
        raise src.fail(spec.id, f"{missing} rows have no node ID (null)")
    repeated = f"SELECT {col} AS key, COUNT(*) AS n FROM {rel} GROUP BY {col} HAVING COUNT(*) > 1"
    dup = engine.rows(f"SELECT key FROM ({repeated}) AS d ORDER BY n DESC, key LIMIT {SAMPLE + 1}")
    if dup:
        count = engine.rows(f"SELECT COUNT(*) FROM ({repeated}) AS d")[0][0]
        raise src.fail(
            spec.id,
            f"{count} node IDs appear more than once (e.g. {sample_text([r[0] for r in dup])}); a node has one row",
        )


def dangling(engine: Engine, spec: EdgeSpec, src: Source, maps: dict[str, str], *, policy: str) -> int:
    """The number of edges naming a node their node tables lack (or none: a null ID). With ``policy``
    ``error`` there must be none (else an error naming a sample); with ``drop`` they are counted, sampled and
    logged, and the edge query's inner joins leave them out."""
    q, rel = engine.dialect.ident, engine.dialect.ident(src.relation)
    ends = ((spec.source, spec.type[0]), (spec.destination, spec.type[2]))
    # first the distinct IDs of each end against the map (an aggregation, then a join as small as the nodes);
    # only when one is missing, the edges themselves
    if not any(
        engine.rows(
            f"SELECT d.k FROM (SELECT DISTINCT {q(c)} AS k FROM {rel}) AS d LEFT JOIN {q(maps[t])} AS m "
            "ON d.k = m.__gs_key WHERE m.__gs_key IS NULL LIMIT 1"
        )
        for c, t in ends
    ):
        return 0
    joins = " ".join(f"LEFT JOIN {q(maps[t])} AS m{i} ON e.{q(c)} = m{i}.__gs_key" for i, (c, t) in enumerate(ends))
    bad = "m0.__gs_key IS NULL OR m1.__gs_key IS NULL"
    ends_sql = f"e.{q(spec.source)}, e.{q(spec.destination)}"
    found = engine.rows(f"SELECT {ends_sql} FROM {rel} AS e {joins} WHERE {bad} LIMIT {SAMPLE + 1}")
    count = engine.rows(f"SELECT COUNT(*) FROM {rel} AS e {joins} WHERE {bad}")[0][0]
    sample = sample_text([f"{s!r} -> {d!r}" for s, d in found]).replace('"', "")
    what = (
        f"{count} edges name a node their node tables lack (source {spec.type[0]!r} in {spec.source!r}, destination "
        f"{spec.type[2]!r} in {spec.destination!r}; e.g. {sample})"
    )
    if policy == "error":
        raise InputError(f"{src.table.describe()} ({src.table.where}): {what}; --on-dangling drop leaves them out")
    log.warning("%s (%s): dropped %s", src.table.describe(), src.table.where, what)
    return int(count)

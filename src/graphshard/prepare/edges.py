"""One edge table prepared: its features fitted (over the edges kept), its rows written with graphshard's
source and destination IDs, features and label in the same Parquet files (so that they align), the reverse
type reading the same files with its two ID columns swapped, and the split masks drawn in a pass over the
written files."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..chunked.spec import FileSpec
from ..errors import InputError
from ..graph import EType, etype_str
from ..names import inside
from .checks import Source, check_feature, check_label, dangling, sample_text
from .config import EdgeSpec
from .engine import Engine
from .expressions import Builder, feature_select
from .fit import Fitter, check_finite_fit, numeric_columns, sort_categories
from .labels import SPLITS, edge_masks, edge_uniform
from .write import DST, SRC, parquet_rows, parquet_spec

LABEL, SPLIT, TIME = "__gs_label", "__gs_split", "__gs_time"
# ID maps of at most this many nodes are sent whole to every Spark task rather than joined by shuffling the
# edges (a hint DuckDB reads as a comment): 77 -> 63 s for 10 M edges on 2 cores (benchmarks/prepare.py)
BROADCAST = 2_000_000


def broadcast(aliases: list[str]) -> str:
    """Spark's hint to broadcast the relations ``aliases`` (empty: none)."""
    return f"/*+ BROADCAST({', '.join(aliases)}) */ " if aliases else ""


@dataclass
class EdgesWritten:
    edges: dict[EType, FileSpec] = field(default_factory=dict)
    data: dict[EType, dict[str, FileSpec]] = field(default_factory=dict)
    counts: dict[EType, int] = field(default_factory=dict)
    fitted: dict[str, Any] = field(default_factory=dict)


class EdgeWriter:
    """Fits, then writes, one edge table (``dropped``: how many of its edges name no node)."""

    def __init__(
        self,
        engine: Engine,
        spec: EdgeSpec,
        src: Source,
        maps: dict[str, str],
        *,
        dropped: int = 0,
        counts: dict[str, int] | None = None,
    ):
        self.engine, self.spec, self.src, self.maps = engine, spec, src, maps
        self.counts = counts or {}
        self.q = engine.dialect.ident
        self.dropped = dropped
        self.fitted: list[dict[str, Any]] = []
        self.classes: list[str] | None = None
        self.fitter = Fitter(engine, src, (spec.source, spec.destination))

    def joined(self, extra: str = "", joins: str = "") -> str:
        q, s = self.q, self.spec
        small = [alias for alias, t in (("a", s.type[0]), ("b", s.type[2])) if self.counts.get(t, 1 << 62) <= BROADCAST]
        return (
            f"SELECT {broadcast(small)}t.*, a.__gs_id AS {q(SRC)}, b.__gs_id AS {q(DST)}{extra} "
            f"FROM {q(self.src.relation)} AS t "
            f"JOIN {q(self.maps[s.type[0]])} AS a ON t.{q(s.source)} = a.__gs_key "
            f"JOIN {q(self.maps[s.type[2]])} AS b ON t.{q(s.destination)} = b.__gs_key{joins}"
        )

    def fit(self) -> None:
        """Check and fit everything (no file written): features, and the label's classes."""
        src = self.src
        if self.dropped:  # fit to the edges that stay
            kept = Source(f"{src.relation}_kept", src.table, src.columns)
            self.engine.view(kept.relation, self.joined())
            self.fitter = Fitter(self.engine, kept, (self.spec.source, self.spec.destination))
        cols = [check_feature(src, f) for f in self.spec.features]
        self.fitter.scan(numeric_columns(self.spec.features, cols))
        self.fitted = [self.fitter.fit(f, c) for f, c in zip(self.spec.features, cols)]
        for f in self.fitted:
            check_finite_fit(f, src)
        if self.spec.label:
            self._fit_label()

    def _fit_label(self) -> None:
        label = self.spec.label
        assert label is not None
        if label.kind == "multi_label":
            raise InputError(
                f"{self.src.table.where}.label: multi_label is for node labels; an edge label is a class or a number"
            )
        check_label(self.src, label)
        f, col = self.fitter, self.q(label.column)
        missing = f"({col} IS NULL)" if label.kind == "classification" else f.missing(label.column)
        count = int(self.engine.rows(f"SELECT COUNT(*) FROM {f.rel} WHERE {missing}")[0][0])
        if count and not label.allow_missing:
            ends = f"{self.q(self.spec.source)}, {self.q(self.spec.destination)}"
            rows = self.engine.rows(f"SELECT {ends} FROM {f.rel} WHERE {missing} LIMIT 6")
            sample = sample_text([f"{s} -> {d}" for s, d in rows])
            raise self.src.fail(
                label.column, f"{count} edges have no label (null or NaN; {sample}); set 'allow_missing: true'"
            )
        if label.kind == "classification":
            text = self.engine.dialect.as_strings(col)
            found = self.engine.rows(f"SELECT DISTINCT {text} FROM {f.rel} WHERE {col} IS NOT NULL")
            self.classes = sort_categories([r[0] for r in found], self.src.columns[label.column].kind == "int")

    def _label_sql(self) -> list[str]:
        label, q, d = self.spec.label, self.q, self.engine.dialect
        if label is None:
            return []
        col = q(label.column)
        if self.classes is not None:
            s = d.as_strings(col)
            whens = " ".join(f"WHEN {s} = {d.literal(c)} THEN {i}" for i, c in enumerate(self.classes))
            out = [f"CAST(CASE {whens} ELSE -1 END AS BIGINT) AS {q(LABEL)}"]
        else:
            out = [f"COALESCE(CAST({col} AS DOUBLE), CAST('NaN' AS DOUBLE)) AS {q(LABEL)}"]
        if label.split.column:
            out.append(f"{d.as_strings(q(label.split.column))} AS {q(SPLIT)}")
        if label.split.time:
            out.append(f"CAST({q(label.split.time)} AS DOUBLE) AS {q(TIME)}")
        return out

    def write(self, tmp: Path, strict: bool = False) -> EdgesWritten:
        """Write the edges into ``tmp``; ``strict``: every edge of the table must be written (else the edges
        naming no node are an error, named with a sample)."""
        q, spec = self.q, self.spec
        plan = feature_select(Builder(self.engine.dialect, self.fitter), self.fitted)
        select = [q(SRC), q(DST), *plan.select(q), *self._label_sql()]
        name = "__".join(spec.type)
        folder = inside(tmp, "edges", name)
        query = f"SELECT {', '.join(select)} FROM ({self.joined(plan.extra, plan.joins)}) AS s"
        files = self.engine.write(query, folder)
        where = f"edges/{name}"
        rows = parquet_rows(files)
        if strict and sum(rows) != self.engine.rows(f"SELECT COUNT(*) FROM {q(self.src.relation)}")[0][0]:
            dangling(self.engine, spec, self.src, self.maps, policy="error")  # raises, naming a sample
        out = EdgesWritten()
        types = [spec.type, spec.reverse_type] if spec.reverse else [spec.type]
        for et, ends in zip(types, ([SRC, DST], [DST, SRC])):
            out.edges[et] = parquet_spec(files, ends, where, "edges")
            out.counts[et] = sum(rows)
            out.data[et] = plan.specs(files, where)
        if spec.label:
            out.data[spec.type]["label"] = parquet_spec(files, [LABEL], where)
            out.data[spec.type].update(self._masks(files, inside(tmp, "edge_masks", name)))
        out.fitted = {
            "source": spec.source,
            "destination": spec.destination,
            "features": self.fitted,
            "dropped": self.dropped,
            "reverse": etype_str(spec.reverse_type) if spec.reverse else None,
        }
        if spec.label:
            out.fitted["label"] = {"column": spec.label.column, "kind": spec.label.kind, "classes": self.classes}
        return out

    def _masks(self, files: list[Path], folder: Path) -> dict[str, FileSpec]:
        """Train/val/test masks, one NumPy file per edge file, from a pass over what was written."""
        import pyarrow.parquet as pq

        label = self.spec.label
        assert label is not None
        split = label.split
        cuts = _time_cuts(files, split.fractions or (0.8, 0.1, 0.1)) if split.time else None
        folder.mkdir(parents=True, exist_ok=True)
        paths: dict[str, list[Path]] = {n: [] for n in SPLITS}
        for i, path in enumerate(files):
            table = pq.read_table(
                path, columns=[SRC, DST, LABEL] + ([SPLIT] if split.column else []) + ([TIME] if split.time else [])
            )
            lab = table.column(LABEL).to_numpy()
            has = lab >= 0 if self.classes is not None else ~np.isnan(lab)
            if split.column:
                text = table.column(SPLIT).to_numpy(zero_copy_only=False)
                masks = {n: has & (text == w) for n, w in zip(SPLITS, ("train", "val", "test"))}
            elif cuts is not None:
                t = table.column(TIME).to_numpy()
                masks = {n: has & (t >= lo) & (t < hi) for n, lo, hi in zip(SPLITS, cuts[:-1], cuts[1:])}
            else:
                u = edge_uniform(split.seed, table.column(SRC).to_numpy(), table.column(DST).to_numpy())
                masks = edge_masks(u, has, split.fractions or (0.8, 0.1, 0.1))
            for n, m in masks.items():
                p = folder / f"{n}-{i}.npy"
                np.save(p, m, allow_pickle=False)
                paths[n].append(p)
        return {n: FileSpec("numpy", tuple(p), " ", f"edge_masks/{folder.name}/{n}") for n, p in paths.items()}


def _time_cuts(files: list[Path], fractions: tuple[float, float, float]) -> list[float]:
    """Time bounds of the train, val and test edges: the values at the fractions' ranks among labelled edges
    (ties at a bound go to the later split)."""
    import pyarrow.parquet as pq

    times = np.sort(
        np.concatenate([pq.read_table(p, columns=[TIME]).column(0).to_numpy() for p in files] or [np.zeros(0)])
    )
    times = times[~np.isnan(times)]
    n = times.size
    bounds = [-np.inf]
    for share in np.cumsum(fractions):
        k = int(np.floor(share * n))
        bounds.append(np.inf if k >= n else float(times[k]))
    return bounds

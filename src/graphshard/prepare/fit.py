"""Fitting a feature's transform to its column: the statistics, vocabulary or order statistics it needs, as a
JSON-ready dict (written to ``transforms.json``, read back by :mod:`graphshard.prepare.apply`).

Numeric columns: a missing value is a null or a NaN; the imputer's value fills it first, and the statistics
(``min``/``max``, ``mean``/``std``, population standard deviation) are those of the filled column. Infinite
values are an error. ``rank_gauss`` records ``count`` and 1,001 order statistics (``quantiles``), so that a new
value's rank can be read off them.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import InputError
from .checks import Source, sample_text
from .config import MAX_CATEGORIES, NUMERIC, Feature
from .engine import Column, Engine

QUANTILES = 1001
RANK_X, RANK_R, RANK_C = "__gs_x", "__gs_r", "__gs_c"  # a rank table: value, its rank, its count


class Fitter:
    """Fits the features of one table; ``key`` lists the columns that name a row in messages."""

    def __init__(self, engine: Engine, src: Source, key: tuple[str, ...]):
        self.engine, self.src, self.key = engine, src, key
        self.q = engine.dialect.ident
        self.rel = self.q(src.relation)
        self._stats: dict[str, tuple[Any, ...]] = {}
        self.rank_tables: dict[tuple[str, float], str] = {}  # (column, fill) -> its rank table

    def scan(self, columns: list[str]) -> None:
        """The statistics of every numeric column of ``columns``, in one pass over the table."""
        parts = []
        for c in dict.fromkeys(columns):
            v, miss = self.value(c), self.missing(c)
            ok = f"CASE WHEN NOT {miss} THEN {v} END"
            parts += [
                f"SUM(CASE WHEN {miss} THEN 1 ELSE 0 END)",
                f"AVG({ok})",
                f"STDDEV_POP({ok})",
                f"MIN({ok})",
                f"MAX({ok})",
                f"SUM(CASE WHEN ABS({v}) = CAST('Infinity' AS DOUBLE) THEN 1 ELSE 0 END)",
            ]
        if not parts:
            return
        row = self.engine.rows(f"SELECT COUNT(*), {', '.join(parts)} FROM {self.rel}")[0]
        for k, c in enumerate(dict.fromkeys(columns)):
            self._stats[c] = (row[0], *row[1 + 6 * k : 7 + 6 * k])

    def fit(self, f: Feature, col: Column) -> dict[str, Any]:
        out: dict[str, Any] = {"column": f.column, "transform": f.transform, "name": f.name}
        if f.transform == "none" and col.kind == "list":
            return out | {"vector": True, "width": self._vector_width(f)}
        if f.transform in ("categorical", "multi_categorical"):
            vocab = self._vocabulary(f, col)
            width = 1 if f.output == "index" else len(vocab)
            extra = {"output": f.output} if f.transform == "categorical" else {"separator": f.separator}
            return out | extra | {"vocabulary": vocab, "width": width}
        return out | self._numeric(f)

    def _rows_where(self, condition: str) -> list[Any]:
        cols = ", ".join(self.q(k) for k in self.key)
        rows = self.engine.rows(f"SELECT {cols} FROM {self.rel} WHERE {condition} LIMIT 6")
        return [r[0] if len(r) == 1 else f"{r[0]} -> {r[1]}" for r in rows]

    def value(self, column: str) -> str:
        return f"CAST({self.q(column)} AS DOUBLE)"

    def missing(self, column: str) -> str:
        v = self.value(column)
        return f"({v} IS NULL OR isnan({v}))"

    def _numeric(self, f: Feature) -> dict[str, Any]:
        v, miss = self.value(f.column), self.missing(f.column)
        ok = f"CASE WHEN NOT {miss} THEN {v} END"
        inf = f"ABS({v}) = CAST('Infinity' AS DOUBLE)"
        if f.column not in self._stats:
            self.scan([f.column])
        total, missing, mean, std, lo, hi, infinite = self._stats[f.column]
        missing, infinite = int(missing or 0), int(infinite or 0)
        if infinite:
            sample = sample_text(self._rows_where(inf))
            raise self.src.fail(f.column, f"{infinite} values are infinite (rows {sample}); features must be finite")
        seen = int(total) - missing
        if missing and f.imputer == "none":
            sample = sample_text(self._rows_where(miss))
            raise self.src.fail(f.column, f"{missing} values are missing (rows {sample}) and the imputer is 'none'")
        if seen == 0 and f.imputer != "zero":
            raise self.src.fail(f.column, f"holds no value to fit {f.transform!r} to (every one of {total} is missing)")
        fill = self._fill(f, ok) if missing else 0.0
        out = {"imputer": f.imputer, "fill": fill, "missing": missing, "width": 1}
        stats = _filled_stats(int(total), seen, mean or 0.0, std or 0.0, lo=lo, hi=hi, fill=fill)
        if f.transform == "min_max":
            out |= {"min": stats[2], "max": stats[3]}
        elif f.transform == "standard":
            out |= {"mean": stats[0], "std": stats[1]}
        elif f.transform == "bucket":
            out |= {"buckets": list(f.buckets), "width": len(f.buckets) + 1}
        elif f.transform == "rank_gauss":
            out |= {"count": int(total), "quantiles": self._order_statistics(f, fill, int(total))}
        return out

    def _fill(self, f: Feature, ok: str) -> float:
        if f.imputer == "zero":
            return 0.0
        if f.imputer == "mean":
            return float(self.engine.rows(f"SELECT AVG({ok}) FROM {self.rel}")[0][0])
        if f.imputer == "median":
            median = self.engine.dialect.median
            return float(self.engine.rows(f"SELECT {median}({ok}, 0.5) FROM {self.rel}")[0][0])
        rows = self.engine.rows(
            f"SELECT x FROM (SELECT {ok} AS x FROM {self.rel}) AS t WHERE x IS NOT NULL "
            "GROUP BY x ORDER BY COUNT(*) DESC, x LIMIT 1"
        )
        return float(rows[0][0])

    def imputed(self, column: str, fill: float) -> str:
        """A numeric column with its missing values filled."""
        return f"CASE WHEN {self.missing(column)} THEN {fill!r} ELSE {self.value(column)} END"

    def _order_statistics(self, f: Feature, fill: float, total: int) -> list[float]:
        """The values at ranks ``1 + floor(i (n - 1) / 1000)``, i = 0..1000, read off the column's rank table
        (built here: the write joins it back for ``u``): only the distinct values whose rows hold such a rank."""
        name = f"__gs_rank_{len(self.rank_tables)}_{self.src.relation}"
        self.engine.ranks(name, f"SELECT {self.imputed(f.column, fill)} AS {self.q(RANK_X)} FROM {self.rel}")
        self.rank_tables[(f.column, fill)] = name
        targets = order_statistic_ranks(total)
        if total == 1:
            rows = self.engine.rows(f"SELECT {self.q(RANK_R)}, {self.q(RANK_C)}, {self.q(RANK_X)} FROM {self.q(name)}")
        else:
            # a distinct value's rows hold ranks r .. r + c - 1; keep it if one of them is a target
            m, a, b = float(total - 1), f"({self.q(RANK_R)} - 1)", f"({self.q(RANK_R)} + {self.q(RANK_C)} - 1)"
            first = f"CEIL({QUANTILES - 1}.0 * {a} / {m!r})"
            last = f"FLOOR(({QUANTILES - 1}.0 * {b} - 1.0) / {m!r})"
            columns = f"{self.q(RANK_R)}, {self.q(RANK_C)}, {self.q(RANK_X)}"
            rows = self.engine.rows(f"SELECT {columns} FROM {self.q(name)} WHERE {first} <= {last}")
        rows.sort()
        out, j = [], 0
        for k in targets:
            while j + 1 < len(rows) and rows[j + 1][0] <= k:
                j += 1
            out.append(float(rows[j][2]))
        return out

    def _vector_width(self, f: Feature) -> int:
        size, col = self.engine.dialect.size, self.q(f.column)
        nulls, lo, hi = self.engine.rows(
            f"SELECT SUM(CASE WHEN {col} IS NULL THEN 1 ELSE 0 END), MIN({size}({col})), MAX({size}({col})) "
            f"FROM {self.rel}"
        )[0]
        if nulls:
            sample = sample_text(self._rows_where(f"{col} IS NULL"))
            raise self.src.fail(
                f.column, f"{nulls} rows have no vector (rows {sample}); a vector feature has one per row"
            )
        if lo != hi:
            raise self.src.fail(
                f.column, f"vectors of different lengths ({lo} to {hi}); a vector feature has one length"
            )
        return int(lo or 0)

    def elements(self, column: str, col: Column, separator: str | None) -> str:
        """A column of lists of strings: a list column, or a string column split at ``separator``."""
        d = self.engine.dialect
        if col.kind == "list":
            return d.string_list(self.q(column))
        return d.split(self.q(column), separator or ",")

    def _vocabulary(self, f: Feature, col: Column) -> list[str]:
        d = self.engine.dialect
        if f.transform == "categorical":
            values = f"SELECT {d.as_strings(self.q(f.column))} AS x FROM {self.rel}"
        else:
            values = f"SELECT {d.explode}({self.elements(f.column, col, f.separator)}) AS x FROM {self.rel}"
        rows = self.engine.rows(
            f"SELECT DISTINCT x FROM ({values}) AS t WHERE x IS NOT NULL AND x <> '' LIMIT {MAX_CATEGORIES + 1}"
        )
        if len(rows) > MAX_CATEGORIES:
            raise self.src.fail(
                f.column, f"more than {MAX_CATEGORIES} categories; give it an integer ID column and a learnt embedding"
            )
        numeric = col.kind == "int" or (col.kind == "list" and col.element == "int")
        return sort_categories([r[0] for r in rows], numeric)


def order_statistic_ranks(count: int, kept: int = QUANTILES) -> list[int]:
    """The ranks (1-based) of the ``kept`` order statistics recorded of a column of ``count`` values:
    ``1 + floor(i (count - 1) / (kept - 1))``, i = 0..kept-1."""
    return [1 + (i * (count - 1)) // (kept - 1) for i in range(kept)] if kept > 1 else [1]


def numeric_columns(features: Any, columns: list[Column]) -> list[str]:
    """The columns of ``features`` that a numeric transform reads (vectors excluded)."""
    return [f.column for f, c in zip(features, columns) if f.transform in NUMERIC and c.kind != "list"]


def sort_categories(values: list[str], numeric: bool) -> list[str]:
    """Categories in their order: integers by value, strings by their code points."""
    return sorted(values, key=int) if numeric else sorted(values)


def _filled_stats(
    total: int, seen: int, mean: float, std: float, *, lo: Any, hi: Any, fill: float
) -> tuple[float, float, float, float]:
    """Mean, population std, min and max of a column after ``total - seen`` missing values became ``fill``,
    from those of the ``seen`` values (exact: no sum of squares)."""
    if seen == 0:
        return fill, 0.0, fill, fill
    m = total - seen
    filled_mean = (seen * mean + m * fill) / total
    var = (seen * std * std + seen * (mean - filled_mean) ** 2 + m * (fill - filled_mean) ** 2) / total
    lo, hi = float(lo), float(hi)
    if m:
        lo, hi = min(lo, fill), max(hi, fill)
    return filled_mean, math.sqrt(max(var, 0.0)), lo, hi


def check_finite_fit(fitted: dict[str, Any], src: Source) -> None:
    for key in ("mean", "std", "min", "max", "fill"):
        if key in fitted and not math.isfinite(fitted[key]):
            raise InputError(f"{src.table.describe()}, column {fitted['column']!r}: {key} is not finite")

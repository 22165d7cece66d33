"""Fitted transforms as SQL expressions, written as the columns of one feature: the pieces of one feature name
in the config's order, each a 32-bit float column (a vector: one list column), which the chunked reader
puts side by side (a categorical index: a 64-bit integer feature of its own). Scalar columns rather than
one list per row: DuckDB writes them twice as fast.

Definitions (``x``: the value after imputation):

- ``none``: ``x`` (a vector column: as it is); ``min_max``: ``(x - min) / (max - min)`` (0 where max = min);
  ``standard``: ``(x - mean) / std`` (0 where std = 0);
- ``bucket`` with bounds ``b_1 < ... < b_k``: one-hot of ``#{i : b_i <= x}`` (k + 1 columns);
- ``rank_gauss``: ``Φ⁻¹((rank(x) - 0.5) / n)``, ``rank`` 1-based, ties sharing the lowest, ``Φ⁻¹`` the
  standard normal quantile (Acklam's approximation, relative error below 1.2e-9);
- ``categorical``: one-hot over the sorted vocabulary (a missing value: all zeros), or the index in it (a
  missing value: the vocabulary's length); ``multi_categorical``: multi-hot over the vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..chunked.spec import FileSpec
from .dialect import Dialect
from .fit import RANK_R, RANK_X
from .write import parquet_spec

# Acklam's rational approximations of the normal quantile: central region, and the tails
_A = (
    -39.69683028665376,
    220.9460984245205,
    -275.9285104469687,
    138.3577518672690,
    -30.66479806614716,
    2.506628277459239,
)
_B = (-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572)
_C = (
    -0.007784894002430293,
    -0.3223964580411365,
    -2.400758277161838,
    -2.549732539343734,
    4.374664141464968,
    2.938163982698783,
)
_D = (0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416)
P_LOW = 0.02425


def _poly(coefs: tuple[float, ...], x: str, tail_one: bool = False) -> str:
    """Horner's form of ``coefs`` in ``x`` (with a final ``+ 1`` term for the denominators)."""
    text = repr(coefs[0])
    for c in coefs[1:]:
        text = f"({text}) * {x} + {c!r}"
    return f"({text}) * {x} + 1.0" if tail_one else text


def normal_quantile(u: str) -> str:
    """``Φ⁻¹(u)`` for ``0 < u < 1`` as SQL."""
    r = f"(({u}) - 0.5) * (({u}) - 0.5)"
    central = f"({_poly(_A, r)}) * (({u}) - 0.5) / ({_poly(_B, r, True)})"
    lo = f"SQRT(-2.0 * LN({u}))"
    hi = f"SQRT(-2.0 * LN(1.0 - ({u})))"
    low = f"({_poly(_C, lo)}) / ({_poly(_D, lo, True)})"
    high = f"-({_poly(_C, hi)}) / ({_poly(_D, hi, True)})"
    return f"CASE WHEN {u} < {P_LOW} THEN {low} WHEN {u} > {1 - P_LOW} THEN {high} ELSE {central} END"


class Builder:
    """Builds the expressions of one table's features; ``rank`` names the column holding a rank_gauss
    feature's ``u`` (computed one query level below, where a window may run)."""

    def __init__(self, dialect: Dialect, fitter: Any):
        self.d, self.fitter = dialect, fitter
        self.q = dialect.ident

    def rank_joins(self, fitted: list[dict[str, Any]], ranks: dict[int, str]) -> tuple[str, str]:
        """For the rank_gauss features (``ranks``: index -> the column to hold its ``u``): the columns to add to
        the query below the features (``u``) and the joins of their rank tables (built by the fitter)."""
        q, cols, joins = self.q, [], []
        for i, column in ranks.items():
            f = fitted[i]
            table, alias = self.fitter.rank_tables[(f["column"], f["fill"])], f"__gs_rk{i}"
            x = self.fitter.imputed(f["column"], f["fill"])
            joins.append(f" LEFT JOIN {q(table)} AS {alias} ON {x} = {alias}.{q(RANK_X)}")
            # doubles throughout: Spark would compute a decimal quotient, rounded to its scale
            u = f"(CAST({alias}.{q(RANK_R)} AS DOUBLE) - 0.5) / CAST({int(f['count'])} AS DOUBLE)"
            cols.append(f", {u} AS {q(column)}")
        return "".join(cols), "".join(joins)

    def piece(self, fitted: dict[str, Any], u_column: str | None = None) -> list[str]:
        """The columns (SQL) ``fitted`` contributes to its feature: 32-bit floats, or one list of them."""
        d, t = self.d, fitted["transform"]
        col = self.q(fitted["column"])
        if fitted.get("vector"):
            return [f"CAST({col} AS {d.float_list})"]
        if t == "categorical":
            s = d.as_strings(col)
            return self._hot([f"{s} = {d.literal(v)}" for v in fitted["vocabulary"]])
        if t == "multi_categorical":
            items = self.fitter.elements(fitted["column"], _Col(fitted), fitted.get("separator"))
            return self._hot([f"{d.contains}({items}, {d.literal(v)})" for v in fitted["vocabulary"]])
        x = self.fitter.imputed(fitted["column"], fitted["fill"])
        if t == "bucket":
            b = fitted["buckets"]
            conds = [f"{x} < {b[0]!r}"]
            conds += [f"{x} >= {lo!r} AND {x} < {hi!r}" for lo, hi in zip(b, b[1:])]
            return self._hot([*conds, f"{x} >= {b[-1]!r}"])
        return [f"CAST({self.scalar(fitted, x, u_column)} AS FLOAT)"]

    def scalar(self, fitted: dict[str, Any], x: str, u_column: str | None) -> str:
        t = fitted["transform"]
        if t == "min_max":
            span = fitted["max"] - fitted["min"]
            return f"({x} - {fitted['min']!r}) / {span!r}" if span > 0 else "0.0"
        if t == "standard":
            return f"({x} - {fitted['mean']!r}) / {fitted['std']!r}" if fitted["std"] > 0 else "0.0"
        if t == "rank_gauss":
            return normal_quantile(self.q(u_column or ""))
        return x

    def index(self, fitted: dict[str, Any]) -> str:
        """A categorical feature's index in its vocabulary (a 64-bit integer)."""
        s, vocab = self.d.as_strings(self.q(fitted["column"])), fitted["vocabulary"]
        whens = " ".join(f"WHEN {s} = {self.d.literal(v)} THEN {i}" for i, v in enumerate(vocab))
        return f"CAST(CASE {whens} ELSE {len(vocab)} END AS BIGINT)" if vocab else "CAST(0 AS BIGINT)"

    @staticmethod
    def _hot(conditions: list[str]) -> list[str]:
        return [f"CAST(CASE WHEN {c} THEN 1.0 ELSE 0.0 END AS FLOAT)" for c in conditions]


@dataclass(frozen=True)
class FeatureSelect:
    """What a table's write selects for its features: ``extra`` columns and ``joins`` below them (rank_gauss's
    ``u`` and rank tables), the output ``columns`` (name -> SQL) and each feature's columns in order
    (``<feature>:<k>``; an index feature is one integer column of its own name; a feature of no column, an
    empty vocabulary, is left out)."""

    extra: str
    joins: str
    columns: dict[str, str]
    features: dict[str, list[str]]

    def select(self, q: Any) -> list[str]:
        """The output columns as select terms (``q`` quotes a name)."""
        return [f"{expr} AS {q(name)}" for name, expr in self.columns.items()]

    def specs(self, files: list[Path], where: str) -> dict[str, FileSpec]:
        """Each feature's file spec over the written ``files`` (float features read as matrices)."""
        return {
            name: parquet_spec(files, cols, where, matrix=name not in self.columns)
            for name, cols in self.features.items()
        }


def feature_select(b: Builder, fitted: list[dict[str, Any]]) -> FeatureSelect:
    """The :class:`FeatureSelect` of a table's ``fitted`` features."""
    ranks = {i: f"__gs_u{i}" for i, f in enumerate(fitted) if f["transform"] == "rank_gauss"}
    extra, joins = b.rank_joins(fitted, ranks)
    columns: dict[str, str] = {}
    features: dict[str, list[str]] = {}
    for i, f in enumerate(fitted):
        if f.get("output") == "index":
            columns[f["name"]] = b.index(f)
            features[f["name"]] = [f["name"]]
            continue
        names = features.setdefault(f["name"], [])
        for expr in b.piece(f, ranks.get(i)):
            names.append(f"{f['name']}:{len(names)}")
            columns[names[-1]] = expr
    return FeatureSelect(extra, joins, columns, {name: cols for name, cols in features.items() if cols})


class _Col:
    """The list-or-string question :meth:`Fitter.elements` asks of a column, answered from the fitted dict."""

    def __init__(self, fitted: dict[str, Any]):
        self.kind = "string" if fitted.get("separator") else "list"

"""The ``local`` engine: DuckDB, in this process, out of core (it spills to a folder of the output's staging
area past its memory limit), on every core. Chosen over Polars' streaming engine by measurement: see
docs/guide/prepare.md and ``benchmarks/prepare.py --compare-local``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import InputError
from .config import Table
from .dialect import DUCKDB
from .engine import Column

_INT = re.compile(r"^(U?(TINY|SMALL|BIG|HUGE)?INT(EGER)?|U?HUGEINT)$")
_FLOAT = re.compile(r"^(DOUBLE|FLOAT|REAL|DECIMAL.*)$")
_TIME = re.compile(r"^(DATE|TIMESTAMP.*|TIME)$")
FILE_BYTES = "256MB"  # the Parquet files of a big result are cut at about this size


def kind_of(type_name: str) -> tuple[str, str | None]:
    """A DuckDB type name read as a column kind (and, for lists, the kind of the elements)."""
    t = type_name.upper()
    if t.endswith("]"):
        return "list", kind_of(t[: t.rindex("[")])[0]
    for pattern, kind in ((_INT, "int"), (_FLOAT, "float"), (_TIME, "time")):
        if pattern.match(t):
            return kind, None
    return {"BOOLEAN": "bool", "VARCHAR": "string"}.get(t, "other"), None


class DuckEngine:
    """A DuckDB connection holding one prepare run's relations.

    Args:
        spill: a folder DuckDB may fill with its spill files (removed by :meth:`close`'s caller).
        memory: DuckDB's memory limit, e.g. ``"3GB"``.
        threads: threads (default: every core).
    """

    name = "local"
    dialect = DUCKDB

    def __init__(self, spill: Path, memory: str = "2.5GB", threads: int | None = None):
        import duckdb

        self._duckdb = duckdb
        self.con = duckdb.connect(config={"memory_limit": memory, "temp_directory": str(spill)})
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        self.con.execute("SET preserve_insertion_order = false")  # order is asked for where it matters
        # DuckDB 2.0 trusts Parquet's min/max statistics, which leave NaN out, to decide that a column holds no
        # NaN: ``isnan(x)`` is then folded to false (statistics propagation) and ``WHERE isnan(x)`` finds no row
        # (filter pushdown into the scan). The missing-value checks and imputation need the NaNs seen.
        self.con.execute("SET disabled_optimizers = 'filter_pushdown,statistics_propagation'")

    def _run(self, sql: str, *params: Any) -> Any:
        try:
            return self.con.execute(sql, list(params) if params else None)
        except self._duckdb.Error as exc:
            raise InputError(f"the local engine (DuckDB) failed: {str(exc).splitlines()[0]}") from None

    def register(self, name: str, table: Table) -> None:
        files = "[" + ", ".join(DUCKDB.literal(str(p)) for p in table.files) + "]"
        if table.format == "parquet":
            source = f"read_parquet({files})"
        else:
            delim = DUCKDB.literal(table.delimiter)
            source = f"read_csv({files}, header = true, delim = {delim}, sample_size = -1)"
        try:
            self.con.execute(f"CREATE VIEW {DUCKDB.ident(name)} AS SELECT * FROM {source}")
            self.columns(name)
        except (self._duckdb.Error, InputError) as exc:
            first = str(exc).splitlines()[0]
            raise InputError(f"{table.describe()} ({table.where}): cannot be read as {table.format}: {first}") from None

    def columns(self, name: str) -> dict[str, Column]:
        out = {}
        for col, type_name, *_ in self._run(f"DESCRIBE SELECT * FROM {DUCKDB.ident(name)}").fetchall():
            kind, element = kind_of(type_name)
            out[col] = Column(col, kind, type_name, element)
        return out

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return self._run(sql).fetchall()

    def arrow(self, sql: str) -> Any:
        try:
            return self.con.sql(sql).to_arrow_table()
        except self._duckdb.Error as exc:
            raise InputError(f"the local engine (DuckDB) failed: {str(exc).splitlines()[0]}") from None

    def view(self, name: str, sql: str) -> None:
        self._run(f"CREATE VIEW {DUCKDB.ident(name)} AS {sql}")

    def number(self, name: str, keys_sql: str) -> None:
        self._run(
            f"CREATE TABLE {DUCKDB.ident(name)} AS SELECT key AS __gs_key, CAST(row_number() OVER (ORDER BY key) - 1 "
            f"AS BIGINT) AS __gs_id FROM (SELECT DISTINCT key FROM ({keys_sql}) WHERE key IS NOT NULL)"
        )

    def ranks(self, name: str, values_sql: str) -> None:
        self._run(
            f"CREATE TABLE {DUCKDB.ident(name)} AS SELECT __gs_x, CAST(SUM(__gs_c) OVER (ORDER BY __gs_x ROWS "
            "BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - __gs_c + 1 AS BIGINT) AS __gs_r, __gs_c "
            f"FROM (SELECT __gs_x, COUNT(*) AS __gs_c FROM ({values_sql}) AS v GROUP BY __gs_x) AS d"
        )

    def write(self, sql: str, folder: Path, ordered_by: str | None = None) -> list[Path]:
        folder.parent.mkdir(parents=True, exist_ok=True)
        order = f" ORDER BY {DUCKDB.ident(ordered_by)}" if ordered_by else ""
        target = DUCKDB.literal(str(folder))
        self._run(f"COPY ({sql}{order}) TO {target} (FORMAT parquet, FILE_SIZE_BYTES '{FILE_BYTES}')")
        files = [p for p in folder.iterdir() if p.suffix == ".parquet"] if folder.is_dir() else []
        return sorted(files, key=lambda p: int(re.sub(r"\D", "", p.stem) or 0))

    def close(self) -> None:
        self.con.close()

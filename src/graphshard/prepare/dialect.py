"""The few words in which DuckDB's SQL and Spark SQL differ, so that one query builder serves both engines.

Everything else the builder writes (``CASE``, ``COALESCE``, ``CAST(.. AS DOUBLE)``, ``AVG``, ``STDDEV_POP``,
``RANK() OVER``, ``LN``, ``SQRT``, joins) reads the same in both.
"""

from __future__ import annotations

import re
from dataclasses import KW_ONLY, dataclass


@dataclass(frozen=True)
class Dialect:
    """One engine's spelling of identifiers, string literals, lists and a few functions."""

    name: str
    quote: str  # identifier quote
    string_type: str
    float_list: str  # a list of 32-bit floats
    _: KW_ONLY
    contains: str  # CONTAINS(list, value)
    explode: str  # one row per element of a list
    size: str
    median: str  # exact median of a column of doubles: MEDIAN(x)

    def ident(self, name: str) -> str:
        """``name`` quoted as an identifier (a column or table name holding any characters)."""
        q = self.quote
        return q + name.replace(q, q + q) + q

    def literal(self, value: str) -> str:
        """``value`` as a string literal."""
        if self.name == "spark":  # Spark SQL reads backslash escapes inside literals
            return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return "'" + value.replace("'", "''") + "'"

    def split(self, column: str, separator: str) -> str:
        """The list of parts of string ``column`` between ``separator``s (taken literally)."""
        if self.name == "spark":  # Spark's split takes a regular expression
            return f"split({column}, {self.literal(re.escape(separator))})"
        return f"string_split({column}, {self.literal(separator)})"

    def as_strings(self, column: str) -> str:
        return f"CAST({column} AS {self.string_type})"

    def string_list(self, column: str) -> str:
        return (
            f"CAST({column} AS {self.string_type}[])" if self.name == "duckdb" else f"CAST({column} AS ARRAY<STRING>)"
        )


DUCKDB = Dialect(
    name="duckdb",
    quote='"',
    string_type="VARCHAR",
    float_list="FLOAT[]",
    contains="list_contains",
    explode="unnest",
    size="len",
    median="quantile_cont",
)
SPARK = Dialect(
    name="spark",
    quote="`",
    string_type="STRING",
    float_list="ARRAY<FLOAT>",
    contains="array_contains",
    explode="explode",
    size="size",
    median="percentile",
)

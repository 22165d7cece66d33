"""What :func:`graphshard.prepare.prepare` asks of an engine (DuckDB on one machine, Spark beyond it), and the
column kinds both engines' types are read as.

An engine holds named relations (the users' tables as views, the ID maps it builds), answers small queries
(statistics, vocabularies, samples of bad rows) as Python rows, hands over a few columns as Arrow (labels),
and writes a query's result as Parquet files, in order when asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .config import Table
from .dialect import Dialect

KINDS = ("int", "float", "bool", "string", "list", "time", "other")


@dataclass(frozen=True)
class Column:
    """A table column as the transforms see it: ``kind`` one of :data:`KINDS` (``element`` for lists)."""

    name: str
    kind: str
    type: str  # the engine's own type name, for messages
    element: str | None = None


class Engine(Protocol):
    """A SQL engine holding the tables of one prepare run."""

    dialect: Dialect
    name: str

    def register(self, name: str, table: Table) -> None:
        """Make ``table``'s files queryable as relation ``name``."""

    def columns(self, name: str) -> dict[str, Column]:
        """The columns of relation ``name``, by name, in table order."""

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        """The rows of a small result."""

    def arrow(self, sql: str) -> Any:
        """A result as a ``pyarrow.Table`` (for columns of every labelled row: keep them few)."""

    def view(self, name: str, sql: str) -> None:
        """Make the rows of ``sql`` queryable as relation ``name`` (computed when read)."""

    def number(self, name: str, keys_sql: str) -> None:
        """Create relation ``name`` (``__gs_key``, ``__gs_id``) from the distinct ``key`` column of ``keys_sql``:
        ``__gs_id`` is the key's rank, 0-based, in ascending order (integers by value, strings by their bytes)."""

    def ranks(self, name: str, values_sql: str) -> None:
        """Create relation ``name`` (``__gs_x``, ``__gs_r``, ``__gs_c``): each distinct value of the ``__gs_x``
        column of ``values_sql``, its rank (1 + how many values are smaller) and how many rows hold it."""

    def write(self, sql: str, folder: Path, ordered_by: str | None = None) -> list[Path]:
        """Write the rows of ``sql`` as Parquet files into the new ``folder``; with ``ordered_by``, sorted
        by that column and the files listed in that order. Returns the files, in order."""

    def close(self) -> None:
        """Release the engine (stop its session, remove its spill files)."""

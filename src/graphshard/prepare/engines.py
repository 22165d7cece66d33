"""Choosing an engine by name; a missing package is one line saying what to install."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ..errors import GraphshardError, InputError
from .engine import Engine

ENGINES = ("local", "spark")
# DuckDB's own limit: the process holds Python, pyarrow and DuckDB's other memory besides (about 1 GiB at 100 M
# edges, benchmarks/prepare.py), so 2.5 GB keeps the whole within 4 GiB
DEFAULT_MEMORY = "2.5GB"
INSTALL = "pip install 'graphshard[prepare]'"


def require_engine(name: str, *, master: str | None = None, conf: dict[str, str] | None = None) -> None:
    """Check, before anything is made, that engine ``name`` is known, installed and given options it takes.

    Raises:
        GraphshardError: its package is not installed (the line names what to install).
        InputError: an unknown engine, or Spark's options given to the local engine.
    """
    if name not in ENGINES:
        raise InputError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")
    if name == "local" and (master or conf):
        raise InputError("--master and --conf are for the spark engine; the local engine runs in this process")
    if name == "local":
        _require("duckdb", "the local engine")
    else:
        _require("pyspark", "the spark engine")


def open_engine(
    name: str,
    *,
    spill: Path,
    master: str | None = None,
    memory: str | None = None,
    conf: dict[str, str] | None = None,
) -> Engine:
    """The engine ``name`` (``local``: DuckDB; ``spark``: PySpark), spilling into ``spill``.

    Raises:
        GraphshardError: its package is not installed (the line names what to install).
        InputError: an unknown engine, or a master URL given to the local engine.
    """
    require_engine(name, master=master, conf=conf)
    if name == "local":
        from .duck import DuckEngine

        return DuckEngine(spill, memory=memory or DEFAULT_MEMORY)
    from .spark import SparkEngine

    return SparkEngine(spill, master=master, memory=memory, conf=conf)


def _require(module: str, what: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise GraphshardError(f"{what} needs {module}: {INSTALL}")

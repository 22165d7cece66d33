"""Users' tables (Parquet or CSV) into a chunked graph: IDs mapped, features transformed, labels and splits
written, on DuckDB (one machine) or Apache Spark (``graphshard prepare``)."""

from .config import PrepareConfig, read_prepare_config
from .run import Prepared, prepare

__all__ = ["PrepareConfig", "Prepared", "prepare", "read_prepare_config"]

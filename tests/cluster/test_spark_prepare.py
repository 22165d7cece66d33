"""``prepare --engine spark`` on a Spark standalone cluster of emulated hosts: a master on node0 and one worker
per host, the driver on node0; the tables and the output on a directory every host sees (as a cluster's
shared file system). The graph written is the local engine's."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from graphshard.prepare import prepare
from tests.prepare.tables import assert_same_graph, write_config, write_tables

from .jobs import clean_env

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("duckdb")


def test_a_spark_cluster_prepares_the_local_engines_graph(cluster, tmp_path):
    from graphshard.prepare.spark import find_java

    shared = tmp_path / "shared"  # outside every host's working directory: seen by all of them
    write_tables(shared, seed=5)
    config = write_config(shared)
    prepare(config, shared / "local")
    c = cluster(2)
    home = Path(pyspark.__file__).parent
    env = clean_env(SPARK_HOME=str(home), SPARK_NO_DAEMONIZE="1", SPARK_LOG_DIR=str(shared / "logs"))
    java = find_java()
    if java:
        env["JAVA_HOME"] = java
    spark_class = str(home / "bin" / "spark-class")
    c.run(0, [spark_class, "org.apache.spark.deploy.master.Master", "--host", "node0", "--port", "7077"], env, "master")
    for h in c.hosts:
        worker = ["org.apache.spark.deploy.worker.Worker", "spark://node0:7077", "--host", h.name]
        args = [*worker, "--cores", "1", "--memory", "1g", "--work-dir", str(shared / f"work-{h.name}")]
        c.run(h.index, [spark_class, *args], env, "worker")
    command = [sys.executable, "-m", "graphshard.cli", "prepare", str(config), "--out", str(shared / "spark")]
    options = ["--engine", "spark", "--master", "spark://node0:7077", "--memory", "512m"]
    driver = c.run(0, [*command, *options, "--conf", "spark.executor.cores=1"], env, "driver")
    assert driver.wait(300) == 0, driver.tail()
    assert "prepared 300 user, 60 item nodes" in driver.output()
    for h in c.hosts:  # each worker ran an executor of the job
        assert list((shared / f"work-{h.name}").glob("app-*/*")), f"no executor ran on {h.name}"
    assert_same_graph(shared / "local", shared / "spark")
    shutil.rmtree(shared / "logs", ignore_errors=True)

"""Shared fixtures: one real local Spark session per test process, a fresh store per test."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from materialization.spark import SHORT_LIVED_JAVA, spark_session
from tracing import LineageSession

# pytest-xdist's worker processes have a __main__ with neither spec nor file, which PySpark
# takes for its own doctest run: importing pyspark.sql.connect (MLflow does, to tell a Spark
# DataFrame) then exits the worker (pyspark/sql/connect/utils.py, check_dependencies)
_main = sys.modules["__main__"]
if getattr(_main, "__spec__", None) is None and not hasattr(_main, "__file__"):
    _main.__file__ = "<pytest-xdist worker>"

# The suite's tables have tens of rows: compiling each query's whole-stage Java code costs
# more than running it (the eager and compressed tests took 8 % less without it, the oracle's
# 14 %). Spark evaluates the same plans either way; runs of the user's jobs keep it.
TINY_DATA_CONF = {"spark.sql.codegen.wholeStage": "false"}


# The files whose tests take longest (with their module fixtures), started first: two xdist
# processes each take the next file as they finish one, so the longest last would leave one
# core idle at the end (the longest-processing-time-first rule). Measured on 2026-12-02, alone:
# differential 442 s, confidence 134 s, oracle 113 s, workloads 105 s, cluster 103 s.
SLOWEST_FIRST = (
    "test_differential.py",
    "test_confidence.py",
    "test_oracle.py",
    "test_workloads.py",
    "test_cluster.py",
    "test_eager.py",
    "test_compressed.py",
    "test_store_trust.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: k for k, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files stay whole


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    # C1 only, as the suite's child processes: two test processes' JVMs share 2 cores, and C2's
    # compiles of code that then runs a few times cost more than they return (a slice of 111
    # tests alone: 282 s against 301 s)
    master = os.environ.get("AL_TEST_MASTER", "local[2]")
    session = spark_session(master, java_options=SHORT_LIVED_JAVA, conf=TINY_DATA_CONF)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """Model tests run torch as Spark's Python workers do (OMP_NUM_THREADS=1): on 2 shared
    cores, 2 intra-op threads beside the JVM and a worker were up to 20 times slower."""
    import torch  # only the modules with models pay for importing it

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def als(spark: SparkSession, tmp_path: Path) -> LineageSession:
    return LineageSession(spark, store=str(tmp_path / "store"))

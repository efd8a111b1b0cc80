"""Shared fixtures: one real local Spark session per test process, a fresh store per test."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from materialization.spark import spark_session
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


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    session = spark_session(os.environ.get("AL_TEST_MASTER", "local[2]"), conf=TINY_DATA_CONF)
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

"""Shared fixtures: one real local Spark session per test process, a fresh store per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from materialization.spark import spark_session
from tracing import LineageSession


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    session = spark_session(os.environ.get("AL_TEST_MASTER", "local[2]"))
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def als(spark: SparkSession, tmp_path: Path) -> LineageSession:
    return LineageSession(spark, store=str(tmp_path / "store"))

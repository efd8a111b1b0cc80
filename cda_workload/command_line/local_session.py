"""The LineageSession a command works in: Spark on ``$AL_SPARK_MASTER`` (default local),
Spark's own logging quietened, the session's progress sent to the command's display."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from cda_workload.command_line.progress import Progress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from materialization.catalog import StoreCatalog
    from tracing import LineageSession


def existing_store(store: str) -> StoreCatalog:
    """The run records of a store a command reads, without Spark: a local store that is not
    there is a typo, not a new store to create."""
    from materialization.catalog import StoreCatalog
    from materialization.locations import normalize_uri

    local = store.removeprefix("file:")
    if "://" not in store and not os.path.isdir(local):
        raise FileNotFoundError(f"no results store at {os.path.abspath(local)} (give --store)")
    return StoreCatalog(normalize_uri(store))


def command_spark(**settings: Any) -> SparkSession:
    """A Spark session for a command. PySpark logs every SQL error it raises as a line of JSON
    with its Java stack; the command line says what went wrong itself, in one line (the stack
    with --verbose). Quietened here, when Spark starts: importing PySpark costs a question that
    never starts it 0.13-0.18 s."""
    from pyspark.logger import PySparkLogger

    from materialization.spark import spark_session

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
    return spark_session(**settings)


def open_session(
    store: str, progress: Progress, verbose: bool = False, question: bool = False
) -> LineageSession:
    """A session on ``store`` whose Spark starts when something first needs it (a question
    answered in process never does); Spark's own log (a failed task's Java and Python traces,
    the cause of which the command prints in one line) only with ``verbose``. For a
    ``question`` about a stored run the JVM compiles with C1 only, unless
    ``$AL_JAVA_OPTIONS`` says otherwise (`al lineage` on the loan example: 19.5-20.2 s →
    15.0 s), and runs with the settings of small lineage queries."""
    from materialization.spark import LOOKUP_CONF, SHORT_LIVED_JAVA
    from tracing import LineageSession  # deferred: `al --help` should not import Spark

    def start() -> SparkSession:
        with progress.working("starting Spark"):
            spark = command_spark(
                java_options=SHORT_LIVED_JAVA if question else None, conf=LOOKUP_CONF if question else None
            )
            spark.sparkContext.setLogLevel("ERROR" if verbose else "OFF")
        return spark

    return LineageSession(store=store, progress=progress.say, start_spark=start)

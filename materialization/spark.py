"""A SparkSession with defaults that suit lineage work on a small machine."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

# the session a reader needs only on some paths, started by the call (a question answered in
# process from a local store never calls it, so never starts a JVM)
SparkOf = Callable[[], SparkSession]


def spark_session(
    master: str | None = None,
    app: str = "augmented-lineage",
    java_options: str | None = None,
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """The active session, or a new one on ``master`` (default ``$AL_SPARK_MASTER`` or
    ``local[2]``) whose driver and executor JVMs get ``$AL_JAVA_OPTIONS``, or ``java_options``
    where that is unset, with ``conf`` set. Few shuffle partitions: lineage queries touch
    few rows."""
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    master = master or os.environ.get("AL_SPARK_MASTER", "local[2]")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this env's packages
    builder = SparkSession.builder
    java = os.environ.get("AL_JAVA_OPTIONS", java_options)
    if java:  # the driver's JVM is started by this call, so its options still apply
        builder = builder.config("spark.driver.extraJavaOptions", java)
        builder = builder.config("spark.executor.extraJavaOptions", java)
    for name, value in (conf or {}).items():
        builder = builder.config(name, value)
    return (
        builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", os.environ.get("AL_SHUFFLE_PARTITIONS", "4"))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.repl.eagerEval.enabled", "true")  # a notebook shows a DataFrame's rows
        # PySpark's DataFrame debugging records the Python call site of every DataFrame call
        # (several JVM round trips and a stack walk each): over two thirds of the round trips
        # of a question traced on Spark; our errors are one line of our own anyway
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        # 4g: a table whose Parquet file is under the 10 MB broadcast threshold can be hundreds
        # of MB in memory, broadcast once per copy the rewrites make (TPC-DS q10's 1.9M-row
        # customer_demographics, three copies per EXISTS under OR, ran out at 2g)
        .config("spark.driver.memory", os.environ.get("AL_DRIVER_MEMORY", "4g"))
        .getOrCreate()
    )


# A process that lives seconds to a minute (a question from the command line, a test's child):
# C2's compiles of code that then runs a few times cost more than they return
SHORT_LIVED_JAVA = "-XX:TieredStopAtLevel=1"

LOOKUP_CONF = {
    # lineage queries touch few rows: adaptive planning adds a job per stage and gains nothing
    "spark.sql.adaptive.enabled": "false",
    # evaluate a LIMIT over all partitions at once instead of in growing rounds of jobs
    "spark.sql.limit.initialNumPartitions": "1000",
}


@contextmanager
def tuned_for_lookups(spark: SparkSession | None) -> Iterator[None]:
    """Session settings for small lineage queries, restored afterwards; None: no session has
    started (one the question starts keeps the settings it was made with)."""
    if spark is None:
        yield
        return
    before = {k: spark.conf.get(k, None) for k in LOOKUP_CONF}
    for key, value in LOOKUP_CONF.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)

"""A SparkSession with defaults that suit lineage work on a small machine."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def spark_session(master: str | None = None, app: str = "augmented-lineage") -> SparkSession:
    """The active session, or a new one on ``master`` (default ``$AL_SPARK_MASTER`` or
    ``local[2]``). Few shuffle partitions: lineage queries touch few rows."""
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    master = master or os.environ.get("AL_SPARK_MASTER", "local[2]")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this env's packages
    return (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", os.environ.get("AL_SHUFFLE_PARTITIONS", "4"))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", os.environ.get("AL_DRIVER_MEMORY", "2g"))
        .getOrCreate()
    )

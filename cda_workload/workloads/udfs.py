"""The model UDFs each workload calls from SQL, registered under their names on demand (a
workload imports, and so loads, only the models it uses)."""

from __future__ import annotations

import re

from pyspark.sql import SparkSession

from models.checksums import model_checksums, udf_models
from reasoning_udfs.udf import declared_udfs

__all__ = ["model_checksums", "register_udfs", "register_udfs_named_in", "udf_models"]

WORKLOAD_UDFS: dict[str, tuple[str, ...]] = {
    "cda": ("person_detection", "text_sentiment"),
    "lfw": ("face_recognition", "name_from_path"),
    "loan": ("credit_exam",),
}


def register_udfs(spark: SparkSession, workload: str) -> None:
    for name in WORKLOAD_UDFS[workload]:
        _register(spark, name)


def register_udfs_named_in(spark: SparkSession, sql: str) -> list[str]:
    """Make the declared UDFs (the project's and any installed package's) that ``sql`` calls
    callable from it (only those: importing a model's module costs seconds)."""
    named = [n for n in declared_udfs() if re.search(rf"\b{n}\s*\(", sql, re.IGNORECASE)]
    for name in named:
        _register(spark, name)
    return named


def _register(spark: SparkSession, name: str) -> None:
    declared_udfs()[name].load().register(spark)

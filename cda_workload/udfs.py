"""The model UDFs each workload calls from SQL, registered under their names on demand (a
workload imports, and so loads, only the models it uses)."""

from __future__ import annotations

import importlib
import re

from pyspark.sql import SparkSession

from models.checksums import model_checksums, udf_models

__all__ = ["model_checksums", "register_udfs", "register_udfs_named_in", "udf_models"]

WORKLOAD_UDFS: dict[str, tuple[str, ...]] = {
    "cda": ("person_detection", "text_sentiment"),
    "lfw": ("face_recognition", "name_from_path"),
    "loan": ("credit_exam",),
}


PROJECT_UDFS: dict[str, str] = {  # name -> module defining it
    "person_detection": "reasoning_udfs.person_detection",
    "text_sentiment": "reasoning_udfs.text_sentiment",
    "face_recognition": "reasoning_udfs.face_recognition",
    "name_from_path": "reasoning_udfs.name_from_path",
    "credit_exam": "reasoning_udfs.credit_exam",
    "credit_exam_lime": "reasoning_udfs.credit_exam",
    "credit_rules": "reasoning_udfs.loan_rules",
    "keyword_sentiment": "reasoning_udfs.text_rules",
}


def register_udfs(spark: SparkSession, workload: str) -> None:
    for name in WORKLOAD_UDFS[workload]:
        _register(spark, name)


def register_udfs_named_in(spark: SparkSession, sql: str) -> list[str]:
    """Make the project's UDFs that ``sql`` calls callable from it (only those: importing a
    model's module costs seconds)."""
    named = [n for n in PROJECT_UDFS if re.search(rf"\b{n}\s*\(", sql, re.IGNORECASE)]
    for name in named:
        _register(spark, name)
    return named


def _register(spark: SparkSession, name: str) -> None:
    getattr(importlib.import_module(PROJECT_UDFS[name]), name).register(spark)

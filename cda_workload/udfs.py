"""The model UDFs each workload calls from SQL, registered under their names on demand (a
workload imports, and so loads, only the models it uses)."""

from __future__ import annotations

import importlib

from pyspark.sql import SparkSession

from models.paths import models_dir, sha256

WORKLOAD_UDFS: dict[str, tuple[str, ...]] = {
    "cda": ("person_detection", "text_sentiment"),
    "lfw": ("face_recognition", "name_from_path"),
    "loan": ("credit_exam",),
}


def register_udfs(spark: SparkSession, workload: str) -> None:
    for name in WORKLOAD_UDFS[workload]:
        getattr(importlib.import_module(f"reasoning_udfs.{name}"), name).register(spark)


def model_checksums() -> dict[str, str]:
    """sha256 of each model's weights, for run records (models absent here are named so)."""
    from models import sentiment_model, yolo_detector  # deferred: importing torch takes seconds

    sums = {}
    for name, relative in (("yolo", yolo_detector.WEIGHTS), ("sentiment", sentiment_model.MODEL)):
        path = models_dir() / relative
        sums[f"model.{name}"] = relative
        sums[f"model.{name}.sha256"] = sha256(path) if path.exists() else "missing"
    return sums

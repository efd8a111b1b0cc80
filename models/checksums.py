"""Which weights file each project model UDF runs on, and its sha256: run records, audit
reports and MLflow params name the exact model behind a decision."""

from __future__ import annotations

from collections.abc import Mapping

from models.paths import SENTIMENT_MODEL, YOLO_WEIGHTS, models_dir, sha256

WEIGHTS = {"yolo": YOLO_WEIGHTS, "sentiment": SENTIMENT_MODEL}  # model -> path under AL_MODELS_DIR
MODEL_OF_UDF = {"person_detection": "yolo", "text_sentiment": "sentiment"}


def model_checksums() -> dict[str, str]:
    """The params of every project model (a workload's parent MLflow run), named as a task
    run's own (:func:`model_params`); models absent here are ``missing``."""
    return model_params(udf_models(sorted(MODEL_OF_UDF)))


def model_params(models: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """``model.<udf>`` (the weights file) and ``model.<udf>.sha256`` of each model UDF: one
    vocabulary for the MLflow params of task runs and of the runs above them."""
    params = {}
    for udf, model in sorted(models.items()):
        params.update({f"model.{udf}": model["weights"], f"model.{udf}.sha256": model["sha256"]})
    return params


def udf_models(udfs: list[str]) -> dict[str, dict[str, str]]:
    """The weights file and checksum behind each of ``udfs`` that has one (run records, audit
    reports); only those models are hashed (every run and every opened run asks)."""
    found = {}
    for udf in udfs:
        if udf in MODEL_OF_UDF:
            relative = WEIGHTS[MODEL_OF_UDF[udf]]
            found[udf] = {"weights": relative, "sha256": _checksum(relative)}
    return found


def _checksum(relative: str) -> str:
    path = models_dir() / relative
    return sha256(path) if path.exists() else "missing"


def changed_weights(recorded: Mapping[str, Mapping[str, str]]) -> list[str]:
    """One line for each model UDF whose weights differ now from those a run recorded (what
    the run was made with): values and reasons computed now would come from other weights."""
    now = udf_models(sorted(recorded)) if recorded else {}
    return [
        f"the weights of {udf} ({m['weights']}) changed since the run: sha256 {m['sha256'][:12]}… then, "
        f"{now[udf]['sha256'][:12]}… now; values and reasons computed now may differ from the run's"
        for udf, m in sorted(recorded.items())
        if udf in now and now[udf]["sha256"] != m["sha256"]
    ]

"""MLflow tracking on embedded defaults: a sqlite database and an artifact folder under one
local directory, unless ``MLFLOW_TRACKING_URI`` points elsewhere (e.g. a tracking server)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mlflow

DEFAULT_DIR = "al_mlflow"


@contextmanager
def tracked_run(experiment: str, run_name: str, root: str | Path | None = None) -> Iterator[Any]:
    """``with tracked_run("cda-bench", "sf0.01"):`` → an active MLflow run in ``experiment``.

    A folder given as ``root`` wins; without one, ``MLFLOW_TRACKING_URI`` (a server) is used
    when set, else ``DEFAULT_DIR``. (MLflow sets that variable itself on every
    ``set_tracking_uri``, so it cannot be allowed to override an explicit folder.)"""
    if root is None and "MLFLOW_TRACKING_URI" in os.environ:
        mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
        experiment_id = _experiment(experiment, None)
    else:
        folder = Path(root or DEFAULT_DIR).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        mlflow.set_tracking_uri(f"sqlite:///{folder / 'mlflow.db'}")
        experiment_id = _experiment(experiment, (folder / "artifacts").as_uri())
    with mlflow.start_run(experiment_id=experiment_id, run_name=run_name) as run:
        yield run


def _experiment(name: str, artifact_location: str | None) -> str:
    found = mlflow.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    return mlflow.create_experiment(name, artifact_location=artifact_location)


def log_records(records: list[dict[str, Any]]) -> None:
    """Every median as a metric, logged in one batch per call (not one request per value)."""
    metrics = {}
    for r in records:
        scale = r["sf"] if r["workload"] == "cda" else r["size"]
        name = f"{r['workload']}.{r['query']}.{scale}.{r['strategy']}.{r['phase']}"
        if r["al_size"] is not None:
            name += f".al{r['al_size']}"
        metrics[f"{name}.median_s"] = r["median_s"]
        if r["phase"] == "task" and r["strategy"] in ("fm", "full"):
            metrics[f"{name}.stored_tuples"] = float(r["stored_tuples"])
    mlflow.log_metrics({k: v for k, v in metrics.items() if v is not None})

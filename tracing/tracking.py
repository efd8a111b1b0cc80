"""MLflow tracking of task runs, on MLflow's fluent model: ``als.run`` inside ``with
mlflow.start_run():`` logs into that run; ``LineageSession(mlflow=True | folder | URI)`` starts
one per run when none is active. Tracking is a side record: when MLflow fails, the lineage run
is kept and a warning says why.

The default tracking store is embedded: a sqlite database and an artifact folder under one
local directory, unless ``MLFLOW_TRACKING_URI`` points elsewhere (e.g. a tracking server)."""

from __future__ import annotations

import json
import os
import re
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracing.errors import first_line

if TYPE_CHECKING:
    from tracing.session import Run

DEFAULT_DIR = "al_mlflow"
EXPERIMENT = "al"  # where runs started by the session option go
Option = bool | str | None  # None: only into an active run; False: never; True/folder/URI: always
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")  # a scheme (sqlite:, http:, file:, databricks:)


@contextmanager
def tracked_run(experiment: str, run_name: str, root: str | Path | None = None) -> Iterator[Any]:
    """``with tracked_run("cda-bench", "sf0.01"):`` → an active MLflow run in ``experiment``.

    ``root``: a tracking URI, or a local folder (sqlite + artifacts inside). A folder given wins;
    without one, ``MLFLOW_TRACKING_URI`` (a server) is used when set, else ``DEFAULT_DIR``.
    (MLflow sets that variable itself on every ``set_tracking_uri``, so it cannot be allowed to
    override an explicit folder.)"""
    import mlflow

    if root is not None and _URI.match(str(root)):
        mlflow.set_tracking_uri(str(root))
        experiment_id = _experiment(experiment, None)
    elif root is None and "MLFLOW_TRACKING_URI" in os.environ:
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
    import mlflow

    found = mlflow.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    return mlflow.create_experiment(name, artifact_location=artifact_location)


def run_params(run: Run, scale_factor: float | None = None) -> dict[str, str]:
    """What identifies a task run: its id, strategy, backend, task kind, models and checksums."""
    udfs = sorted(run.record.get("udfs", {}))
    params = {
        "run_id": run.id,
        "strategy": run.strategy,
        "backend": run.backend,
        "task_kind": "sql" if run.task.language == "sql" else "dataframe",
    }
    if udfs:
        params["udfs"] = ",".join(udfs)
    for udf, model in run.models.items():
        params.update({f"model.{udf}": model["weights"], f"model.{udf}.sha256": model["sha256"]})
    if scale_factor is not None:
        params["scale_factor"] = str(scale_factor)
    return params


def run_metrics(run: Run) -> dict[str, float]:
    record = run.record
    return {
        "task_seconds": float(record.get("task_seconds", float("nan"))),
        "output_rows": float(record["output"]["rows"]),
        "stored_tuples": float(run.stored_tuples),
        "lineage_store_bytes": float(run.stored_bytes + run.index_bytes),
    }


def track(run: Run, option: Option, scale_factor: float | None = None) -> str | None:
    """Log ``run`` into the active MLflow run, or into a new one when ``option`` asks for it;
    the MLflow run id, or None when nothing was logged."""
    if option is False:
        return None
    loaded = sys.modules.get("mlflow")  # no active run can exist before user code imports mlflow
    active = loaded.active_run() if loaded is not None else None
    if active is None and not option:
        return None
    try:
        if active is not None:
            return _log(active.info.run_id, run, scale_factor)
        with tracked_run(EXPERIMENT, run.id, None if option is True else str(option)) as started:
            return _log(started.info.run_id, run, scale_factor)
    except Exception as exc:  # a tracking failure must not lose the lineage run
        warnings.warn(
            f"MLflow tracking of run {run.id} failed, the run is kept in the store: "
            f"{type(exc).__name__}: {first_line(exc)}",
            stacklevel=3,
        )
        return None


def _log(mlflow_run: str, run: Run, scale_factor: float | None) -> str:
    """Params and metrics in one batch, the run's record as a JSON artifact. The first task
    run logged into an MLflow run uses plain names; a later one, whose params would clash
    (MLflow params cannot change), prefixes its names with its run id."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    client = MlflowClient()
    params = run_params(run, scale_factor)
    metrics = run_metrics(run)
    held = client.get_run(mlflow_run).data.params
    if any(held.get(k, v) != v for k, v in params.items()):
        params = {f"{run.id}.{k}": v for k, v in params.items()}
        metrics = {f"{run.id}.{k}": v for k, v in metrics.items()}
    now = int(time.time() * 1000)
    client.log_batch(
        mlflow_run,
        metrics=[Metric(k, v, now, 0) for k, v in metrics.items()],
        params=[Param(k, v) for k, v in params.items()],
    )
    client.log_text(mlflow_run, json.dumps(run.record, indent=2, default=str), f"lineage_runs/{run.id}.json")
    return mlflow_run

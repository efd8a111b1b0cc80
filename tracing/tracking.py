"""MLflow tracking of task runs, laid out as MLflow users expect: ``als.run`` inside ``with
mlflow.start_run():`` logs each task run as a nested run of that one (fluent API);
``LineageSession(mlflow=True | folder | URI)`` starts a top-level one per task run when none
is active. Each holds ``al.*`` tags (run id, store, task kind, UDFs), the settings and the
models' weights and sha256 as params, metrics, the source snapshots read as dataset inputs and
the run's record as an artifact; commands such as ``al report --mlflow`` add their files to
it, found by its ``al.run_id`` tag. Tracking is a side record: when MLflow fails, the lineage
run is kept and a warning says why.

The default tracking store is embedded: a sqlite database and an artifact folder under one
local directory, unless ``MLFLOW_TRACKING_URI`` points elsewhere (e.g. a tracking server)."""

from __future__ import annotations

import json
import os
import re
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from materialization.fingerprints import files_version, location
from tracing.errors import first_line

if TYPE_CHECKING:
    from tracing.session import Run

DEFAULT_DIR = "al_mlflow"
EXPERIMENT = "al"  # where runs started by the session option go
Option = bool | str | None  # None: only into an active run; False: never; True/folder/URI: always
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")  # a scheme (sqlite:, http:, file:, databricks:)


@contextmanager
def tracked_run(experiment: str, run_name: str, root: str | Path | None = None) -> Iterator[Any]:
    """``with tracked_run("cda-bench", "sf0.01"):`` → an active MLflow run in ``experiment``
    of the tracking store :func:`use_tracking_store` picks for ``root``."""
    import mlflow

    with mlflow.start_run(experiment_id=use_tracking_store(experiment, root), run_name=run_name) as run:
        yield run


def use_tracking_store(experiment: str, root: str | Path | None = None) -> str:
    """Point MLflow at a tracking store; the id of ``experiment`` there (made if new).

    ``root``: a tracking URI, or a local folder (sqlite + artifacts inside). A folder given wins;
    without one, ``MLFLOW_TRACKING_URI`` (a server) is used when set, else ``DEFAULT_DIR``.
    (MLflow sets that variable itself on every ``set_tracking_uri``, so it cannot be allowed to
    override an explicit folder.)"""
    import mlflow

    if root is not None and _URI.match(str(root)):
        mlflow.set_tracking_uri(str(root))
        return _experiment(experiment, None)
    if root is None and "MLFLOW_TRACKING_URI" in os.environ:
        mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
        return _experiment(experiment, None)
    folder = Path(root or DEFAULT_DIR).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(f"sqlite:///{folder / 'mlflow.db'}")
    return _experiment(experiment, (folder / "artifacts").as_uri())


def _experiment(name: str, artifact_location: str | None) -> str:
    import mlflow

    found = mlflow.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    return mlflow.create_experiment(name, artifact_location=artifact_location)


def run_tags(run: Run) -> dict[str, str]:
    """What finds a task run's MLflow run again: its id and store, what kind of task it was."""
    tags = {
        "al.run_id": run.id,
        "al.store": run.session.store.uri,
        "al.task_kind": "sql" if run.task.language == "sql" else "dataframe",
    }
    udfs = sorted(run.record.get("udfs", {}))
    if udfs:
        tags["al.udfs"] = ",".join(udfs)
    return tags


def run_params(run: Run, scale_factor: float | None = None) -> dict[str, str]:
    """How the run was made: strategy, backend, and the weights file and sha256 of each model."""
    params = {"strategy": run.strategy, "backend": run.backend}
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
    """Log ``run`` as a nested run of the active MLflow run, or into a new one when ``option``
    asks for it; the MLflow run id, or None when nothing was logged."""
    if option is False:
        return None
    loaded = sys.modules.get("mlflow")  # no active run can exist before user code imports mlflow
    active = loaded.active_run() if loaded is not None else None
    if active is None and not option:
        return None
    try:
        if active is not None:
            within = active.info.experiment_id  # a nested run goes where its parent is
            with loaded.start_run(experiment_id=within, run_name=run.id, nested=True) as child:
                return _log(run, scale_factor, child.info.run_id)
        with tracked_run(EXPERIMENT, run.id, None if option is True else str(option)) as started:
            return _log(run, scale_factor, started.info.run_id)
    except Exception as exc:  # a tracking failure must not lose the lineage run
        warnings.warn(
            f"MLflow tracking of run {run.id} failed, the run is kept in the store: "
            f"{type(exc).__name__}: {first_line(exc)}",
            stacklevel=3,
        )
        return None


def _log(run: Run, scale_factor: float | None, mlflow_run: str) -> str:
    """Into the active MLflow run: tags, params and metrics, the snapshots and the user's
    files read as dataset inputs, the run's record as an artifact."""
    import mlflow
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.data.spark_dataset_source import SparkDatasetSource

    mlflow.set_tags(run_tags(run))
    mlflow.log_params(run_params(run, scale_factor))
    mlflow.log_metrics(run_metrics(run))
    copies = {e.get("snapshot") for e in run.record.get("read_in_place", [])}
    for snapshot, digest in run.record.get("inputs", []):
        if snapshot in copies:
            continue  # a copy of the user's files: logged as those files, below
        table = snapshot.rstrip("/").split("/")[-2]
        source = MetaDataset(SparkDatasetSource(path=snapshot), name=table, digest=digest[:16])
        mlflow.log_input(source, context="source")
    for entry in run.record.get("read_in_place", []):  # the user's own files, by their paths
        read = SparkDatasetSource(path=location(entry))
        files = MetaDataset(read, name=entry["table"], digest=files_version(entry)[:16])
        mlflow.log_input(files, context="source")
    mlflow.log_text(json.dumps(run.record, indent=2, default=str), "lineage_run.json")
    return mlflow_run


def tracked_run_of(run: Run) -> str | None:
    """The MLflow run a task run was logged as (its ``al.run_id`` tag), in the current
    tracking store; None if it was not."""
    from mlflow import MlflowClient

    client = MlflowClient()
    experiments = [e.experiment_id for e in client.search_experiments()]
    found = client.search_runs(experiments, filter_string=f"tags.`al.run_id` = '{run.id}'", max_results=1)
    return found[0].info.run_id if found else None

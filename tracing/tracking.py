"""MLflow tracking of task runs, laid out as MLflow users expect: ``als.run`` inside ``with
mlflow.start_run():`` logs each task run as a nested run of that one (fluent API), named by
the task's name; ``LineageSession(mlflow=True | folder | URI)`` starts a top-level one per
task run when none is active. Each holds ``al.*`` tags (run id, store, task kind, UDFs), the
settings and each model's weights and sha256 as params (the names the demo's and the
benchmark's parent runs use too), metrics, the tables read as dataset inputs (the user's
names, their files' or snapshots' location, their columns as the schema), each model as a
logged model (external: its weights stay where they are, named with their sha256) that the
run links by a tag, the task's text and a compact summary of its record. Answers
(``lin.log()``, ``al lineage --mlflow``) and reports (``al report --mlflow``) are added to
it, found by its ``al.run_id`` tag. Tracking is a side record: when MLflow fails, the
lineage run is kept and a warning says why.

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
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from materialization.fingerprints import files_version, location
from models.checksums import model_params
from segmenter.operators import Source
from tracing.errors import first_line
from tracing.task_summary import tables_read, task_name

if TYPE_CHECKING:
    from segmenter.operators import Col
    from tracing.lineage import AugmentedLineage
    from tracing.session import Run

DEFAULT_DIR = "al_mlflow"
EXPERIMENT = "al"  # where runs started by the session option go
MODEL_TYPE = "reasoning-udf"  # the logged models of the UDFs' weights
# Spark's simple type names -> MLflow's column types (see _schema for the others)
MLFLOW_TYPES = {
    "boolean": "boolean", "tinyint": "integer", "smallint": "integer", "int": "integer",
    "bigint": "long", "float": "float", "double": "double", "string": "string",
    "binary": "binary", "date": "datetime", "timestamp": "datetime", "timestamp_ntz": "datetime",
}  # fmt: skip
# what the record artifact keeps: how the run was made, read and written (the whole record,
# with every file's digest and the task's tree, stays in the store)
SUMMARY = ("run_id", "name", "created", "strategy", "backend", "mode", "reasons", "task_seconds",
           "output", "udfs", "models", "segments", "inputs")  # fmt: skip
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
    params = {"strategy": run.strategy, "backend": run.backend, **model_params(run.models)}
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
            name = task_name(run.record, run.task)
            with loaded.start_run(experiment_id=within, run_name=name, nested=True) as child:
                return _log(run, scale_factor, child.info.run_id)
        root = None if option is True else str(option)
        with tracked_run(EXPERIMENT, task_name(run.record, run.task), root) as started:
            return _log(run, scale_factor, started.info.run_id)
    except Exception as exc:  # a tracking failure must not lose the lineage run
        warnings.warn(
            f"MLflow tracking of run {run.id} failed, the run is kept in the store: "
            f"{type(exc).__name__}: {first_line(exc)}",
            stacklevel=3,
        )
        return None


def _log(run: Run, scale_factor: float | None, mlflow_run: str) -> str:
    """Into the active MLflow run: tags, params and metrics, the tables read as dataset
    inputs, the models as logged models, the task's text and the record's summary."""
    import mlflow

    mlflow.set_tags(run_tags(run))
    mlflow.log_params(run_params(run, scale_factor))
    mlflow.log_metrics(run_metrics(run))
    _log_datasets(run)
    log_models(run.models, mlflow.active_run().info.experiment_id)
    suffix = {"sql": "sql", "code": "py"}.get(run.task.language, "txt")  # txt: Spark's plan
    mlflow.log_text(run.task.text or "", f"task.{suffix}")
    mlflow.log_text(json.dumps(record_summary(run.record), default=str), "lineage_run.json")
    return mlflow_run


def _log_datasets(run: Run) -> None:
    """Each table read, by the user's name: where Spark read it (their files, or the store's
    snapshot of a registered table), digested by its fingerprint, with its columns."""
    import mlflow
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.data.spark_dataset_source import SparkDatasetSource

    class Profiled(MetaDataset):
        """A dataset's row count as its profile, where the run's record or the snapshot has it."""

        def __init__(self, rows: int | None, **given: Any) -> None:
            super().__init__(**given)
            self.rows = rows

        @property
        def profile(self) -> dict[str, int] | None:
            return None if self.rows is None else {"num_rows": self.rows}

        def to_dict(self) -> dict[str, str]:
            return {**super().to_dict(), "profile": json.dumps(self.profile)}

    in_place = {e["table"]: e for e in run.record.get("read_in_place", [])}
    snapshots = {n.table: n.snapshot for n in run.task.root.walk() if isinstance(n, Source)}
    digests = dict(run.record.get("inputs", []))
    catalog = run.session.store.catalog
    for table, cols in tables_read(run.task).items():
        entry = in_place.get(table)
        path = location(entry) if entry else snapshots[table]
        digest = files_version(entry) if entry else digests[path]
        counts = [f.get("rows") for f in entry["files"]] if entry else [catalog.snapshot_rows(path)]
        dataset = Profiled(
            None if None in counts else sum(counts),  # type: ignore[arg-type]
            source=SparkDatasetSource(path=path), name=table, digest=digest[:16], schema=_schema(cols),
        )
        mlflow.log_input(dataset, context="source")


def _schema(cols: list[Col]) -> Any:
    """The columns as MLflow's schema: decimals as double (MLflow has no decimal type),
    arrays and structs as any."""
    from mlflow.types.schema import AnyType, ColSpec, Schema

    def mlflow_type(dtype: str) -> Any:
        return MLFLOW_TYPES.get(dtype) or ("double" if dtype.startswith("decimal") else AnyType())

    return Schema([ColSpec(mlflow_type(c.dtype), c.name) for c in cols])


def log_models(models: dict[str, dict[str, str]], experiment: str) -> None:
    """Each model UDF's weights as a logged model, linked from the active run by its tag
    ``al.model.<udf>`` (MLflow outside Databricks takes no model inputs): one per weights
    sha256 in the experiment, so runs with the same weights link the same model; external
    (the weights stay under ``AL_MODELS_DIR``, named by path and sha256)."""
    import mlflow

    for udf, model in sorted(models.items()):
        mlflow.set_tag(f"al.model.{udf}", _logged_model(udf, model, experiment))


def _logged_model(udf: str, model: dict[str, str], experiment: str) -> str:
    import mlflow

    sha = model["sha256"]
    found = mlflow.search_logged_models(
        experiment_ids=[experiment],
        filter_string=f"name = '{udf}' AND tags.`al.sha256` = '{sha}'",
        max_results=1,
        output_format="list",
    )
    if found:
        return found[0].model_id
    made = mlflow.create_external_model(
        name=udf,
        source_run_id=mlflow.active_run().info.run_id,
        tags={"al.sha256": sha, "al.weights": model["weights"]},
        params={"weights": model["weights"], "sha256": sha},
        model_type=MODEL_TYPE,
        experiment_id=experiment,
    )
    return made.model_id


def record_summary(record: dict[str, Any]) -> dict[str, Any]:
    """The record without what only the store needs (each file's digest, the task's tree,
    the capture's layout): the files read in place as their location and version."""
    summary = {k: record[k] for k in SUMMARY if k in record}
    for entry in record.get("read_in_place", []):
        where = {"location": location(entry), "version": files_version(entry)}
        summary.setdefault("read_in_place", {})[entry["table"]] = where
    return summary


@contextmanager
def task_run(run: Run, root: str | Path | None) -> Iterator[str]:
    """The MLflow run ``run`` was logged as (its ``al.run_id`` tag) in the tracking store
    :func:`use_tracking_store` picks for ``root``, active to add to; when there is none, a new
    one logged as :func:`track` logs it."""
    import mlflow

    experiment = use_tracking_store(EXPERIMENT, root)
    found = tracked_run_of(run.id)
    if found is not None:
        with mlflow.start_run(run_id=found):
            yield found
        return
    with mlflow.start_run(experiment_id=experiment, run_name=task_name(run.record, run.task)) as started:
        yield _log(run, run.session.scale_factor, started.info.run_id)


def log_answer(answer: AugmentedLineage, mlflow_run: str, name: str | None = None) -> str:
    """``answer`` as ``answers/<name>.json`` of MLflow run ``mlflow_run`` (default name: the
    time it is logged); the artifact's path."""
    from mlflow import MlflowClient

    path = f"answers/{name or datetime.now(UTC).strftime('%Y%m%dT%H%M%S%f')}.json"
    MlflowClient().log_text(mlflow_run, answer.to_json(), path)
    return path


def tracked_run_of(run_id: str) -> str | None:
    """The MLflow run a task run was logged as (its ``al.run_id`` tag), in the current
    tracking store; None if it was not."""
    from mlflow import MlflowClient

    client = MlflowClient()
    experiments = [e.experiment_id for e in client.search_experiments()]
    found = client.search_runs(experiments, filter_string=f"tags.`al.run_id` = '{run_id}'", max_results=1)
    return found[0].info.run_id if found else None

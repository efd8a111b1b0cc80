"""MLflow tracking of ``als.run`` on real MLflow (sqlite files in tmp folders, read back with
MlflowClient): a nested run of the active run per task run, named by the task, as MLflow's
fluent API does, with the tables read as datasets with their columns, the task's text, a
compact record and the answers asked later (``lin.log()``); a top-level one when the session
asks, nothing otherwise, and a broken tracking store costs a warning, not the run. Each
model's weights are one logged model per sha256 that the runs using them take as input.
Also the code a run records for a DataFrame task."""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path

import mlflow
import pytest
from mlflow import MlflowClient
from pyspark.sql import SparkSession

from cda_workload.workloads.loan_example import loan_task, register_loan_tables
from models.checksums import udf_models
from tracing import LineageSession, Run
from tracing.present.html import run_html
from tracing.task_summary import task_name
from tracing.tracking import SUMMARY, log_models

SQL = "SELECT ClientID, Income FROM client WHERE Income > 2000"
CODE = "loan_task(als)  # the loan example's DataFrame"


@pytest.fixture(scope="module")
def als(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> LineageSession:
    session = LineageSession(spark, store=str(tmp_path_factory.mktemp("tracking") / "store"))
    register_loan_tables(session)
    return session


def _runs_in(uri: str) -> list:
    client = MlflowClient(uri)
    ids = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(ids)


def test_runs_log_as_nested_runs_of_the_active_mlflow_run(als: LineageSession, tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    experiment = mlflow.create_experiment("user", artifact_location=(tmp_path / "artifacts").as_uri())
    with mlflow.start_run(experiment_id=experiment) as active:
        first = als.run(loan_task(als), code=CODE, name="loans")
        second = als.run(SQL, strategy="full")
    client = MlflowClient(uri)
    parent = f"tags.mlflow.parentRunId = '{active.info.run_id}'"
    children = {r.data.tags["al.run_id"]: r.info.run_id for r in client.search_runs([experiment], parent)}
    assert set(children) == {first.id, second.id}
    assert client.get_run(active.info.run_id).data.params == {}  # nothing merged into the user's run
    tables = {first.id: {"client", "debt", "loan"}, second.id: {"client"}}
    names = {first.id: "loans", second.id: task_name(second.record, second.task)}
    assert names[second.id].startswith("al.client.")  # SQL names no task: the table and a digest
    for run, kind in ((first, "dataframe"), (second, "sql")):
        logged = client.get_run(children[run.id])
        tags, params, metrics = logged.data.tags, logged.data.params, logged.data.metrics
        assert logged.info.run_name == names[run.id] and tags["al.store"] == als.store.uri
        assert tags["al.task_kind"] == kind and params["strategy"] == run.strategy and "run_id" not in params
        assert metrics["output_rows"] == run.output.count()
        assert metrics["task_seconds"] == pytest.approx(run.record["task_seconds"])
        assert metrics["lineage_store_bytes"] == run.stored_bytes + run.index_bytes
        inputs = logged.inputs.dataset_inputs
        assert {d.dataset.name for d in inputs} == tables[run.id]
        assert {t.value for d in inputs for t in d.tags if t.key == "mlflow.data.context"} == {"source"}
        sources = {d.dataset.name: json.loads(d.dataset.source)["path"] for d in inputs}
        assert sources["client"] in {p for p, _ in run.record["inputs"]}  # the registered table's snapshot
        client_columns = {d.dataset.name: json.loads(d.dataset.schema)["mlflow_colspec"] for d in inputs}[
            "client"
        ]
        assert [(c["name"], c["type"]) for c in client_columns][::3] == [
            ("ClientID", "string"),
            ("Income", "long"),
        ]
        profiles = {d.dataset.name: json.loads(d.dataset.profile) for d in inputs}
        assert profiles["client"] == {"num_rows": als.table("client").count()}  # as registered
        folder = Path(client.download_artifacts(logged.info.run_id, "", str(tmp_path / run.id)))
        record = json.loads((folder / "lineage_run.json").read_text())
        assert record["run_id"] == run.id and set(record) <= {*SUMMARY, "read_in_place"}
        assert len((folder / "lineage_run.json").read_bytes()) < 4096  # the whole record stays in the store
        assert (folder / ("task.py" if kind == "dataframe" else "task.sql")).read_text() == run.task.text
    assert client.get_run(children[first.id]).data.tags["al.udfs"] == "credit_rules"
    assert client.get_run(children[first.id]).data.metrics["lineage_store_bytes"] > 0  # fm kept φ's input
    assert mlflow.active_run() is None

    # an answer asked later goes to its task run's MLflow run
    answer = first.lineage(where="Judge = 'Reject'")
    assert answer.log("rejected") == "answers/rejected.json"
    logged = client.download_artifacts(children[first.id], "answers/rejected.json", str(tmp_path / "answer"))
    assert json.loads(Path(logged).read_text()) == json.loads(answer.to_json())
    unlogged = als.run(SQL)  # no active run, option off: nothing logged
    assert len(_runs_in(uri)) == 3  # the user's run and its two task runs
    with pytest.raises(LookupError, match=f"run {unlogged.id} has no MLflow run in this tracking store"):
        unlogged.lineage(sample=1).log()

    # each model's weights: one logged model per sha256, linked from every run using them (no
    # model UDF runs here: the models of a run's record, as als.run logs them)
    models = udf_models(["text_sentiment"])  # the MiniLM folder under AL_MODELS_DIR
    runs = []
    for name in ("Q3", "Q20"):
        with mlflow.start_run(experiment_id=experiment, run_name=name) as run:
            log_models(models, experiment)
        runs.append(run.info.run_id)
    used = [client.get_run(r).data.tags["al.model.text_sentiment"] for r in runs]
    assert used[0] == used[1]
    model = client.get_logged_model(used[0])
    assert model.name == "text_sentiment" and model.source_run_id == runs[0]
    assert model.params == {
        "weights": "sentiment/minilm-l6-sst2",
        "sha256": models["text_sentiment"]["sha256"],
    }
    assert len(model.params["sha256"]) == 64 and model.tags["al.sha256"] == model.params["sha256"]


def test_session_option_starts_one_mlflow_run_per_task_run(
    spark: SparkSession, als: LineageSession, tmp_path: Path
) -> None:
    tracked = LineageSession(spark, store=als.store.uri, mlflow=str(tmp_path / "ml"))
    tracked.scale_factor = 0.01
    run = tracked.run(SQL)
    (logged,) = _runs_in(f"sqlite:///{tmp_path / 'ml' / 'mlflow.db'}")
    assert logged.info.run_name == task_name(run.record, run.task) and mlflow.active_run() is None
    assert logged.data.tags["al.run_id"] == run.id and logged.data.params["scale_factor"] == "0.01"
    assert logged.info.artifact_uri.startswith((tmp_path / "ml" / "artifacts").as_uri())


def test_a_failing_tracking_store_warns_and_keeps_the_run(
    spark: SparkSession, als: LineageSession, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("a file where the database's folder should be")
    broken = LineageSession(spark, store=als.store.uri, mlflow=f"sqlite:///{tmp_path}/file/mlflow.db")
    with pytest.warns(UserWarning, match=r"MLflow tracking of run r\S+ failed, the run is kept"):
        run = broken.run(SQL)
    assert als.load_run(run.id).output.count() == run.output.count() > 0
    assert mlflow.active_run() is None


def test_a_dataframe_task_records_its_code_or_spark_plan(als: LineageSession) -> None:
    given = als.run(loan_task(als), code=CODE)
    assert (given.task.language, given.task.text) == ("code", CODE)
    html = run_html(als.load_run(given.id))  # kept in the store, not only in memory
    assert f"<h4>Task code</h4><pre class='al-code'>{escape(CODE)}</pre>" in html
    planned: Run = als.load_run(als.run(loan_task(als)).id)
    assert planned.task.language == "plan" and "Aggregate [Judge" in planned.task.text
    assert "Spark&#x27;s analyzed plan" in run_html(planned)
    assert "Aggregate [Judge" in run_html(planned) and not re.search(r"Judge#\d", run_html(planned))
    sql_run = als.load_run(als.run(SQL).id)
    assert sql_run.task.language == "sql"
    assert "<td>0003</td>" in sql_run.output._repr_html_()  # a notebook shows the output's rows
    with pytest.raises(ValueError, match="code= describes a DataFrame task"):
        als.run(SQL, code=CODE)
    with pytest.raises(ValueError, match="code= must be non-empty"):
        als.run(loan_task(als), code=" ")

"""OpenLineage export (issues 17 and 50): a run over the loan tables with joins, the
credit_rules UDF and an aggregate becomes its START and COMPLETE events, every event and facet
valid against the spec's JSON schemas (2-0-2, copied in tests/openlineage_spec/) and the
custom facets' own (shipped in the package), its datasets named as openlineage-spark names
the same folders, its column lineage checked by hand against the task; `al export` prints the
same events or sends them through the client's file and http transports (a local endpoint)."""

from __future__ import annotations

import inspect
import json
import shlex
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, ValidationError
from openlineage.client.serde import Serde
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from referencing import Registry, Resource

from cda_workload.workloads.loan_example import register_loan_tables
from materialization.execute import UDFError
from reasoning_udfs.loan_rules import credit_rules
from tests.failing_udf import fragile
from tests.test_store_trust import _al
from tracing import LineageSession
from tracing.present.openlineage_event import (
    SCHEMAS,
    JobId,
    OpenLineageEmitter,
    ParentId,
    dataset_naming,
    facet_schemas,
    run_events,
    send,
)

SPEC = Path(__file__).parent / "openlineage_spec"
PARENT = ParentId(JobId("airflow", "loans_dag.judge"), str(uuid.uuid4()))


def judged_by_country(als: LineageSession) -> DataFrame:
    """The loan example's joins and model call, grouped by decision and country."""
    client, debt, loan = als.table("client"), als.table("debt"), als.table("loan")
    december = loan.filter(F.month("ApplicationDate") == 12)
    joined = client.join(debt, "ClientID").join(december, "ClientID")
    judged = joined.withColumn("Judge", credit_rules("Income", "Debt", "LoanAmount"))
    return judged.groupBy("Judge", "Country").agg(
        F.sum("LoanAmount").alias("total"),
        F.max(F.col("Income") - F.col("Debt")).alias("margin"),
        F.count(F.lit(1)).alias("n"),
    )


def _columns(fields: list[dict[str, Any]], tables: dict[str, str]) -> dict[str, str]:
    """``{"table.column": "TYPE SUBTYPE [description]"}`` of OpenLineage input fields, the
    datasets named by the table names ``tables`` gives their paths."""

    def says(t: dict[str, str]) -> str:
        return " ".join(filter(None, (t["type"], t["subtype"], t.get("description"))))

    return {f"{tables[f['name']]}.{f['field']}": "; ".join(map(says, f["transformations"])) for f in fields}


def _registry() -> Registry:
    """The spec's schemas and the package's own, by ``$id``: no network."""
    spec = [json.loads(p.read_text()) for p in SPEC.glob("*.json")]
    found = spec + list(facet_schemas().values())
    return Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in found)


def _facets(event: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from event["run"]["facets"].values()
    yield from event["job"]["facets"].values()
    for dataset in event["inputs"] + event["outputs"]:
        for kind in ("facets", "inputFacets", "outputFacets"):
            yield from dataset.get(kind, {}).values()


def _valid(event: dict[str, Any], registry: Registry) -> None:
    """The event against the spec's RunEvent, and each facet against the schema its
    ``_schemaURL`` names (an unknown URL fails: no facet goes unchecked)."""
    Draft202012Validator({"$ref": event["schemaURL"]}, registry=registry).validate(event)
    for facet in _facets(event):
        Draft202012Validator({"$ref": facet["_schemaURL"]}, registry=registry).validate(facet)


@pytest.fixture
def endpoint() -> Iterator[tuple[str, list[tuple[str, dict[str, Any]]]]]:
    """A lineage endpoint on the loopback: its base URL and the (path, event) it received."""
    received: list[tuple[str, dict[str, Any]]] = []

    class Lineage(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, json.loads(body)))
            self.send_response(201)
            self.end_headers()

        def log_message(self, *args: Any) -> None:  # no request lines on stderr
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Lineage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received
    server.shutdown()
    thread.join(timeout=5)


def test_dataset_names_follow_openlineage_spark() -> None:
    """FilesystemDatasetUtils' own cases: a local folder, object stores, HDFS."""
    assert dataset_naming("file:/warehouse/location/") == ("file", "/warehouse/location")
    assert dataset_naming("file:///warehouse/location") == ("file", "/warehouse/location")
    assert dataset_naming("s3a://bucket/warehouse/location/") == ("s3://bucket", "warehouse/location")
    assert dataset_naming("gs://bucket") == ("gs://bucket", "/")
    assert dataset_naming("hdfs://namenode:8020/warehouse") == ("hdfs://namenode:8020", "/warehouse")
    with pytest.raises(ValueError, match="NAMESPACE/JOB_NAME/RUN_ID"):
        ParentId.parse("airflow/no-run-id")


def test_a_run_is_its_openlineage_events(
    als: LineageSession,
    tmp_path: Path,
    endpoint: tuple[str, list[tuple[str, dict[str, Any]]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    register_loan_tables(als)
    live = tmp_path / "live.jsonl"  # what a listener sends while the runs run
    emitter = OpenLineageEmitter({"type": "file", "log_file_path": str(live), "append": True}, "live")
    monkeypatch.setattr(als, "listeners", [emitter])
    run = als.run(judged_by_country(als), code=inspect.getsource(judged_by_country))
    failing = als.table("client").withColumn("doubled", fragile(F.col("Income") * 0 + 13))
    with pytest.raises(UDFError, match="unlucky input"):
        als.run(failing, name="doubling")
    store = als.store.uri
    event = run.openlineage()  # the COMPLETE event
    registry = _registry()

    # sent as the runs ran: START then COMPLETE, START then FAIL with the error, all valid
    sent_live = [json.loads(line) for line in live.read_text().splitlines()]
    for one in sent_live:
        _valid(one, registry)
    assert [(e["eventType"], e["job"]["name"]) for e in sent_live] == [
        ("START", "judged_by_country"), ("COMPLETE", "judged_by_country"),
        ("START", "doubling"), ("FAIL", "doubling"),
    ]  # fmt: skip
    began, completed, _, failed = sent_live
    assert began["run"]["runId"] == completed["run"]["runId"] == event["run"]["runId"]
    assert began["eventTime"] < completed["eventTime"] == run.record["created"]
    assert completed["outputs"] == event["outputs"] and began["inputs"] == event["inputs"]
    assert failed["run"]["runId"] == sent_live[2]["run"]["runId"] != began["run"]["runId"]
    error = failed["run"]["facets"]["errorMessage"]
    assert error["message"].startswith("UDFError: ") and "unlucky input" in error["message"]
    assert error["programmingLanguage"] == "PYTHON" and "Traceback" in error["stackTrace"]
    assert failed["outputs"] == [] and failed["job"]["namespace"] == "live"

    # START and COMPLETE of one run, valid, and the client's file transport writes them unchanged
    job = JobId("loans", "judge_by_country")
    events = run_events(run.record, run.task, store, job, PARENT)
    made = [Serde.to_dict(e) for e in events]
    sent = tmp_path / "events.jsonl"
    send(events, {"type": "file", "log_file_path": str(sent), "append": True})
    emitted = [json.loads(line) for line in sent.read_text().splitlines()]
    for written in emitted:
        _valid(written, registry)
        assert written["run"]["facets"].pop("tags")["tags"][0]["key"] == "openlineage_client_version"
    assert emitted == made
    start, complete = emitted
    assert (start["eventType"], complete["eventType"]) == ("START", "COMPLETE")
    assert start["eventTime"] < complete["eventTime"] == run.record["created"]
    assert (
        start["run"] == complete["run"] and start["outputs"] == [] and start["inputs"] == complete["inputs"]
    )
    assert (complete["job"]["namespace"], complete["job"]["name"]) == ("loans", "judge_by_country")
    parent = complete["run"]["facets"]["parent"]
    assert (parent["run"]["runId"], parent["job"]["namespace"], parent["job"]["name"]) == (
        PARENT.run_id,
        "airflow",
        "loans_dag.judge",
    )

    # run.openlineage(): the COMPLETE event of the job named by the task's function, no parent
    _valid(event, registry)
    assert event["eventType"] == "COMPLETE" and event["eventTime"] == run.record["created"]
    assert event["schemaURL"] == "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
    assert (
        event["run"]["runId"]
        == complete["run"]["runId"]
        == str(uuid.uuid5(uuid.NAMESPACE_URL, f"{store}/runs/{run.id}"))
    )
    assert "parent" not in event["run"]["facets"]
    assert (event["job"]["namespace"], event["job"]["name"]) == (store, "judged_by_country")
    assert event["job"]["facets"]["sourceCode"]["sourceCode"] == run.task.text

    # inputs: the snapshots' folders, named as openlineage-spark names a Parquet folder it reads,
    # with the task's table names as symlinks and their columns
    snapshots = {p for p, _ in run.record["inputs"]}
    assert {(d["namespace"], d["name"]) for d in event["inputs"]} == {
        ("file", p.removeprefix("file:").rstrip("/")) for p in snapshots
    }
    tables = {d["name"]: d["facets"]["symlinks"]["identifiers"][0]["name"] for d in event["inputs"]}
    read = {tables[d["name"]]: [f["name"] for f in d["facets"]["schema"]["fields"]] for d in event["inputs"]}
    assert read == {
        "client": ["ClientID", "Name", "Country", "Income"],
        "debt": ["ClientID", "Debt", "DebtDate"],
        "loan": ["LoanID", "ClientID", "LoanAmount", "ApplicationDate"],
    }
    assert {d["facets"]["dataSource"]["uri"] for d in event["inputs"]} == snapshots

    # the output folder and its column lineage, by hand from the task
    (output,) = event["outputs"]
    assert (output["namespace"], output["name"]) == dataset_naming(f"{store}/runs/{run.id}/output")
    assert output["name"].endswith(f"/runs/{run.id}/output") and output["name"].startswith("/")
    columns = [f["name"] for f in output["facets"]["schema"]["fields"]]
    assert columns == ["Judge", "Country", "total", "margin", "n"]
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == run.record["output"]["rows"]
    lineage = output["facets"]["columnLineage"]
    by_udf = "DIRECT TRANSFORMATION through UDF credit_rules"
    assert {name: _columns(f["inputFields"], tables) for name, f in lineage["fields"].items()} == {
        "Judge": {"client.Income": by_udf, "debt.Debt": by_udf, "loan.LoanAmount": by_udf},
        "Country": {"client.Country": "DIRECT IDENTITY"},
        "total": {"loan.LoanAmount": "DIRECT AGGREGATION"},
        "margin": {"client.Income": "DIRECT AGGREGATION", "debt.Debt": "DIRECT AGGREGATION"},
    }  # n is COUNT(*): no column's value, only which rows there are
    assert _columns(lineage["dataset"], tables) == {
        "client.ClientID": "INDIRECT JOIN",
        "debt.ClientID": "INDIRECT JOIN",
        "loan.ClientID": "INDIRECT JOIN",
        "loan.ApplicationDate": "INDIRECT FILTER",
        "client.Country": "INDIRECT GROUP_BY",
        "client.Income": "INDIRECT GROUP_BY",  # Judge, a grouping key, is computed from these
        "debt.Debt": "INDIRECT GROUP_BY",
        "loan.LoanAmount": "INDIRECT GROUP_BY",
    }

    # custom run facets, each named by a schema of its own: the model call, how the run was
    # kept, where to ask per row
    facets = event["run"]["facets"]
    assert facets["augmentedLineage_modelCalls"]["udfs"] == [
        {
            "name": "credit_rules",
            "module": "reasoning_udfs.loan_rules",
            "reasonType": credit_rules.reason_type,
            "calls": [{"value": "Judge", "arguments": ["Income", "Debt", "LoanAmount"]}],
        }
    ]
    kept = facets["augmentedLineage_execution"]
    assert (kept["strategy"], kept["backend"]) == ("fm", "lazy")
    assert kept["_schemaURL"] == f"{SCHEMAS}ExecutionRunFacet.json#/$defs/ExecutionRunFacet"
    pointer = facets["augmentedLineage_rowLineage"]
    assert pointer["command"] == f"al lineage {run.id} --store {shlex.quote(store)}"
    assert all(f["_producer"] == event["producer"] for f in facets.values())
    assert {f["_schemaURL"].split("#")[0] for f in facets.values()} <= set(facet_schemas())
    with pytest.raises(ValidationError, match="is not of type 'string'"):  # the schemas can refuse
        _valid(
            event
            | {
                "run": {
                    **event["run"],
                    "facets": {**facets, "augmentedLineage_execution": kept | {"backend": 1}},
                }
            },
            registry,
        )

    # the command line prints the same events, or sends them through the client's transports
    code, out, err = _al("export", run.id, "--store", store, "--format", "openlineage")
    assert code == 0 and json.loads(out.splitlines()[-1]) == event, err
    written = tmp_path / "spool.jsonl"
    argv = ["export", run.id, "--store", store, "--namespace", "audit", "--job-name", "judge"]
    code, out, _ = _al(*argv, "-o", str(written))
    assert code == 0 and out == f"sent 2 events (file) to {written}\n"
    exported = [json.loads(line) for line in written.read_text().splitlines()]
    assert [e["job"]["namespace"] + "/" + e["job"]["name"] for e in exported] == ["audit/judge"] * 2
    url, received = endpoint
    parent_id = f"{PARENT.job.namespace}/{PARENT.job.name}/{PARENT.run_id}"
    code, out, err = _al(*argv, "--transport", "http", "--url", url, "--parent", parent_id)
    assert code == 0 and out == f"sent 2 events (http) to {url}\n", err
    assert [path for path, _ in received] == ["/api/v1/lineage"] * 2
    for _, got in received:
        _valid(got, registry)
    assert [e["eventType"] for _, e in received] == ["START", "COMPLETE"]
    assert received[1][1]["run"]["facets"]["parent"]["run"]["runId"] == PARENT.run_id
    assert received[1][1]["outputs"] == complete["outputs"]
    code, _, err = _al("export", run.id, "--store", store, "--transport", "http")
    assert code == 2 and err.strip().endswith("--transport http needs --url URL")
    code, _, err = _al("export", "r-missing", "--store", store)
    assert code == 2 and err.strip().splitlines()[-1].startswith("al: error: no run 'r-missing'")

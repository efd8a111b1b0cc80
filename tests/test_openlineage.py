"""OpenLineage export (issue 17): a run over the loan tables with joins, the credit_rules UDF
and an aggregate becomes one RunEvent that the openlineage-python client emits unchanged, with
its column lineage checked by hand against the task; `al export` prints the same event."""

from __future__ import annotations

import inspect
import json
import shlex
import uuid
from pathlib import Path
from typing import Any

from openlineage.client import OpenLineageClient
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cda_workload.workloads.loan_example import register_loan_tables
from reasoning_udfs.loan_rules import credit_rules
from tests.test_store_trust import _al
from tracing import LineageSession
from tracing.present.openlineage_event import run_event


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


def _columns(fields: list[dict[str, Any]]) -> dict[str, str]:
    """``{"table.column": "TYPE SUBTYPE [description]"}`` of OpenLineage input fields."""

    def says(t: dict[str, str]) -> str:
        return " ".join(filter(None, (t["type"], t["subtype"], t.get("description"))))

    return {f"{f['name']}.{f['field']}": "; ".join(map(says, f["transformations"])) for f in fields}


def test_a_run_is_one_openlineage_run_event(als: LineageSession, tmp_path: Path) -> None:
    register_loan_tables(als)
    run = als.run(judged_by_country(als), code=inspect.getsource(judged_by_country))
    store = als.store.uri
    event = run.openlineage()

    # valid: built from the client's spec classes, the client emits it as the very same JSON
    sent = tmp_path / "events.jsonl"
    to_file = {"type": "file", "log_file_path": str(sent), "append": True}
    OpenLineageClient(config={"transport": to_file}).emit(run_event(run.record, run.task, store))
    emitted = json.loads(sent.read_text())
    assert emitted["run"]["facets"].pop("tags")["tags"][0]["key"] == "openlineage_client_version"
    assert emitted == event
    assert event["eventType"] == "COMPLETE" and event["eventTime"] == run.record["created"]
    assert event["schemaURL"].endswith("/OpenLineage.json#/$defs/RunEvent")
    assert event["run"]["runId"] == str(uuid.uuid5(uuid.NAMESPACE_URL, f"{store}/runs/{run.id}"))
    assert event["job"]["namespace"] == store and event["job"]["name"].startswith("al.client_debt_loan.")
    assert event["job"]["facets"]["sourceCode"]["sourceCode"] == run.task.text

    # inputs: the snapshots read, with their columns
    read = {d["name"]: [f["name"] for f in d["facets"]["schema"]["fields"]] for d in event["inputs"]}
    assert read == {
        "client": ["ClientID", "Name", "Country", "Income"],
        "debt": ["ClientID", "Debt", "DebtDate"],
        "loan": ["LoanID", "ClientID", "LoanAmount", "ApplicationDate"],
    }
    assert {d["facets"]["dataSource"]["uri"] for d in event["inputs"]} == {p for p, _ in run.record["inputs"]}

    # the output and its column lineage, by hand from the task
    (output,) = event["outputs"]
    assert output["name"] == f"runs/{run.id}/output"
    columns = [f["name"] for f in output["facets"]["schema"]["fields"]]
    assert columns == ["Judge", "Country", "total", "margin", "n"]
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == run.record["output"]["rows"]
    lineage = output["facets"]["columnLineage"]
    by_udf = "DIRECT TRANSFORMATION through UDF credit_rules"
    assert {name: _columns(f["inputFields"]) for name, f in lineage["fields"].items()} == {
        "Judge": {"client.Income": by_udf, "debt.Debt": by_udf, "loan.LoanAmount": by_udf},
        "Country": {"client.Country": "DIRECT IDENTITY"},
        "total": {"loan.LoanAmount": "DIRECT AGGREGATION"},
        "margin": {"client.Income": "DIRECT AGGREGATION", "debt.Debt": "DIRECT AGGREGATION"},
    }  # n is COUNT(*): no column's value, only which rows there are
    assert _columns(lineage["dataset"]) == {
        "client.ClientID": "INDIRECT JOIN",
        "debt.ClientID": "INDIRECT JOIN",
        "loan.ClientID": "INDIRECT JOIN",
        "loan.ApplicationDate": "INDIRECT FILTER",
        "client.Country": "INDIRECT GROUP_BY",
        "client.Income": "INDIRECT GROUP_BY",  # Judge, a grouping key, is computed from these
        "debt.Debt": "INDIRECT GROUP_BY",
        "loan.LoanAmount": "INDIRECT GROUP_BY",
    }

    # custom run facets: the model call, how the run was kept, where to ask per row
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
    pointer = facets["augmentedLineage_rowLineage"]
    assert pointer["command"] == f"al lineage {run.id} --store {shlex.quote(store)}"
    assert all(f["_producer"] == event["producer"] and f["_schemaURL"] for f in facets.values())

    # the command line prints the same event (or writes it); a wrong run id is one line
    code, out, err = _al("export", run.id, "--store", store, "--format", "openlineage")
    assert code == 0 and json.loads(out) == event, err
    written = tmp_path / "event.json"
    code, out, _ = _al("export", run.id, "--store", store, "--namespace", "audit", "-o", str(written))
    assert code == 0 and out == f"wrote {written}\n"
    assert json.loads(written.read_text()) == event | {"job": event["job"] | {"namespace": "audit"}}
    code, _, err = _al("export", "r-missing", "--store", store)
    assert code == 2 and err.strip().splitlines()[-1].startswith("al: error: no run 'r-missing'")

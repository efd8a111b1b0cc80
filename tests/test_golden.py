"""Golden: the paper's loan example (Examples 1-12, Figs. 1-4) gives exactly the published
augmented lineage of ⟨Reject, 1⟩ under every strategy."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from contextlib import redirect_stdout
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from cda_workload.command_line.cli import main
from cda_workload.workloads.loan_example import LOAN_SQL, loan_task, register_loan_tables
from materialization.capture import Capture
from materialization.locations import LocationError
from reasoning_udfs.loan_rules import credit_rules
from segmenter.errors import LineageError
from tests.child_process import spark_child_env
from tests.golden import LOAN_OUTPUT, assert_reject_lineage
from tracing import AugmentedLineage, LineageSession, Run
from tracing.lineage import unique_rows

STRATEGIES = ("rerun", "full", "fm")
# a store path as people name folders: every golden question (each strategy, the eager and
# compressed indexes, a new process, the CLI) reads a store whose path holds each of these
ODD_FOLDER = "my runs 'Q4' \"draft\" 100%20 #2 Übersicht"


@pytest.fixture(scope="module")
def loan(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> LineageSession:
    als = LineageSession(spark, store=str(tmp_path_factory.mktemp("golden") / ODD_FOLDER / "store"))
    register_loan_tables(als)
    return als


@pytest.fixture(scope="module")
def runs(loan: LineageSession) -> dict[str, Run]:
    return {s: loan.run(loan_task(loan), strategy=s) for s in STRATEGIES}


def test_operator_tree_and_segments_of_example_10(loan: LineageSession) -> None:
    task = loan.parse(loan_task(loan))
    tree = task.render()
    assert [line.split(":")[0].strip() for line in tree.splitlines()] == [
        "α Aggregation",
        "φ Function",
        "π Projection",
        "⋈ Join",
        "T Source",
        "T Source",
        "σ Selection",
        "T Source",
    ]
    assert "Judge := credit_rules(Income" in tree
    assert "⋈ Join: (client.ClientID = debt.ClientID) AND (client.ClientID = loan.ClientID)" in tree
    assert "month(ApplicationDate" in tree
    run_segments = loan.run(loan_task(loan), strategy="rerun").segments()
    assert run_segments.splitlines() == [
        "segment 0 [Non-D] α  <- segment 1",
        "segment 1 [Non-D] φ-π-⋈-σ  <- table client, table debt, table loan",
    ]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_output(runs: dict[str, Run], strategy: str) -> None:
    assert sorted(tuple(r) for r in runs[strategy].output.collect()) == LOAN_OUTPUT


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_augmented_lineage_of_reject_matches_fig_4(runs: dict[str, Run], strategy: str) -> None:
    lin = runs[strategy].lineage(rows=[("Reject", 1)])
    assert_reject_lineage(lin)
    assert lin.reasoning_rows()[0]["segment"] == 1
    assert [q.segment for q in lin.queries] == [0, 1]  # Proposition 3: one query per segment


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_lineage_of_accept_excludes_filtered_loans(runs: dict[str, Run], strategy: str) -> None:
    lin = runs[strategy].lineage(where="Judge = 'Accept'")
    assert lin.source_ids("client") == {("0001",), ("0003",)}
    assert lin.source_ids("loan") == {("L01",), ("L03",)}  # L04 (October) was filtered out
    assert {r["value"] for r in lin.reasoning_rows()} == {"Accept"}
    assert all(r["reason"]["attributes"] == ["Income", "LoanAmount"] for r in lin.reasoning_rows())


@pytest.fixture(scope="module")
def eager(loan: LineageSession) -> Run:
    return loan.run(loan_task(loan), backend="eager", capture=Capture(storage=("pairs", "provrc")))


def test_eager_capture_with_lazy_reasons_answers_as_with_eager_ones(
    loan: LineageSession, eager: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reasons="lazy" on the eager backend: the models run in normal mode while the task
    runs, a question computes the reasons of the calls it reaches (cached in the run, and
    said to the session's progress), and every answer is that of a capture that computed
    them all; a forward question filtering on reasons computes every call's."""
    lazy = loan.run(loan_task(loan), backend="eager", reasons="lazy")
    modes = (lazy.record["mode"], lazy.record["reasons"], eager.record["mode"])
    assert modes == ("normal", "lazy", "reasoning")
    parts = ("rows", "targets", "source_lineage", "control_lineage", "reasoning_lineage")
    said: list[str] = []
    monkeypatch.setattr(loan, "progress", said.append)
    computed = []
    for asked in ({"where": "Judge = 'Reject'"}, {}, {}):  # the last from the reasons cached
        mine, theirs = lazy.lineage(**asked).to_dict(), eager.lineage(**asked).to_dict()
        assert [mine[p] for p in parts] == [theirs[p] for p in parts], asked
        computed.append([m for m in said if m.startswith("credit_rules: computing the reasons of ")])
        said.clear()
    assert [len(c) for c in computed] == [1, 1, 0], computed
    assert [f for f in loan.load_run(lazy.id).record["added"] if f.startswith("reasons/")]
    rejected = {"udf": "credit_rules", "where": "Judge = 'Reject'"}
    assert lazy.forward(**rejected).rows() == eager.forward(**rejected).rows()
    on_reasons = {"udf": "credit_rules", "where": "Judge_reason.loan_ratio > 2"}
    found = lazy.forward(**on_reasons)  # every call's reason computed now, then filtered
    assert found.rows() == eager.forward(**on_reasons).rows()
    assert 0 < found.given.num_rows < lazy.forward(udf="credit_rules", where=None).given.num_rows


@pytest.mark.parametrize("backend", ["lazy", "eager", "compressed"])
def test_one_question_keeps_each_rows_answer_apart(runs: dict[str, Run], eager: Run, backend: str) -> None:
    """All three output rows in one question: each row's answer is Fig. 4's for Reject and the
    Accept answer above for Accept; indexing, slicing, ``where`` and the JSON agree; the merged
    answer is their union."""
    lin = runs["fm"].lineage() if backend == "lazy" else eager.lineage(backend=backend)
    assert len(lin) == 3 and [one.to_dict()["targets"] for one in lin.rows] == [
        [{"Judge": j, "count": n}] for j, n in LOAN_OUTPUT
    ]
    assert_reject_lineage(lin.where(Judge="Reject"))
    accept = lin[0]
    assert accept.source_ids("loan") == {("L01",), ("L03",)}
    assert {r["value"] for r in accept.reasoning_rows()} == {"Accept"}
    assert lin[1].source_ids("client") == {("0006",)} and lin[-1].source_ids("loan") == {("L02",)}
    assert [one.to_dict() for one in lin[0:2].rows] == [accept.to_dict(), lin[1].to_dict()]
    assert lin.where(lambda row: row["count"] == 1).source_ids("loan") == {("L02",), ("L07",)}
    assert lin.where("count = 1 AND Judge <> 'Accept'").to_dict() == lin[1:].to_dict()  # as where= takes
    assert_reject_lineage(lin.where("Judge = 'Reject'"))
    with pytest.raises(LineageError, match=r"^lin.where\(.*\) cannot be judged here \(.*\): ask run"):
        lin.where("reflect('java.lang.System', 'exit', 0) IS NULL")  # only what the allow-list judges
    named = r"no output column is named 'Verdict' \(the output's columns: Judge, count\)"
    with pytest.raises(LineageError, match=named):
        lin.where("Verdict = 'Reject'")
    data = json.loads(lin.to_json())
    assert data["schema_version"] == 4 and data["run_id"] == lin.run_id and lin.run_id
    assert data["steps"] and all(not w.startswith("segment") for w in data["steps"].values())
    assert [row["output"] for row in data["rows"]] == [{"Judge": j, "count": n} for j, n in LOAN_OUTPUT]
    for row, one in zip(data["rows"], lin.rows):
        alone = json.loads(one.to_json())
        assert row["source"] == alone["source_lineage"] and row["reasoning"] == alone["reasoning_lineage"]
    loans = {r["LoanID"] for row in data["rows"] for r in row["source"]["loan"]}
    assert loans == {r["LoanID"] for r in lin.source_rows("loan")} == {"L01", "L02", "L03", "L07"}
    assert "Per output row" in str(lin) and "[2] Judge='Reject', count=1" in str(lin)
    with pytest.raises(LineageError, match="no output row of this answer has"):
        lin.where(Judge="Maybe")
    reads = {c["inputs"]["Income"]: c["reads"] for c in lin.reasoning_rows()}  # each call's own rows
    joa = {"client": [{"ClientID": "0002"}], "debt": [{"ClientID": "0002"}], "loan": [{"LoanID": "L02"}]}
    assert reads[2200] == joa and lin[2].reasoning_rows()[0]["reads"] == joa
    assert reads[3400]["loan"] == [{"LoanID": "L01"}] and "read: client '0002'" in str(lin[2])


def test_pages_answer_every_row_apart(runs: dict[str, Run], monkeypatch: pytest.MonkeyPatch) -> None:
    """Past PER_ROW_MAX rows one question merges its answer (here: 2 of the 3 rows); pages of
    rows give every row's own answer, the same as asking for each row alone."""
    monkeypatch.setattr("tracing.session.PER_ROW_MAX", 2)
    run = runs["fm"]
    with pytest.raises(LineageError, match=r"merges 3 output rows .* ask run.lineage_pages\(…\)"):
        _ = run.lineage().rows
    pages = list(run.lineage_pages(page=2))
    assert [len(p) for p in pages] == [2, 1]
    parts = ("targets", "source_lineage", "reasoning_lineage")

    def answer(one: AugmentedLineage) -> dict:
        return {k: v for k, v in one.to_dict().items() if k in parts}

    apart = {tuple(answer(one)["targets"][0].values()): answer(one) for p in pages for one in p.rows}
    assert sorted(apart) == sorted(LOAN_OUTPUT)
    assert apart[("Reject", 1)] == answer(run.lineage(rows=[("Reject", 1)]))
    (only,) = run.lineage_pages(where="Judge = 'Reject'")
    assert_reject_lineage(only.rows[0])
    with pytest.raises(ValueError, match="page= is a number of output rows from 1 to 2"):
        next(run.lineage_pages(page=3))


def test_a_per_row_answer_keeps_each_row_once_in_first_seen_order() -> None:
    """The rows a per-row answer found along several paths, each once: flat columns grouped
    by Arrow, nested ones (reasons) through Python; NULLs equal NULLs, as a set has them."""
    amounts = pa.array([Decimal("1.10"), None, Decimal("1.10"), None, None, None], pa.decimal128(7, 2))
    flat = pa.table({"k": [2, 1, 2, None, None, 1], "v": amounts})
    once = unique_rows(flat)
    assert once.schema == flat.schema
    assert once.to_pylist() == [{"k": 2, "v": Decimal("1.10")}, {"k": 1, "v": None}, {"k": None, "v": None}]
    nested = pa.table({"k": [1, 1, 2], "why": [{"a": [1]}, {"a": [1]}, {"a": [2]}]})
    assert unique_rows(nested).to_pylist() == [{"k": 1, "why": {"a": [1]}}, {"k": 2, "why": {"a": [2]}}]


def test_strategies_store_what_they_promise(runs: dict[str, Run]) -> None:
    assert runs["rerun"].stored_tuples == 0
    # the φ segment's output: the four December applications that survive the joins
    assert runs["fm"].stored_tuples == runs["full"].stored_tuples == 4


def test_sql_task_gives_the_same_lineage(loan: LineageSession, runs: dict[str, Run]) -> None:
    credit_rules.register(loan.spark)
    run = loan.run(LOAN_SQL, strategy="fm")
    assert run.segments().splitlines()[0].startswith("segment 0 [Non-D] α-π")
    sql_lin = run.lineage(rows=[{"Judge": "Reject"}])
    df_lin = runs["fm"].lineage(rows=[{"Judge": "Reject"}])
    assert sql_lin.to_dict()["source_lineage"] == df_lin.to_dict()["source_lineage"]
    assert [r["value"] for r in sql_lin.reasoning_rows()] == ["Reject"]


def test_lineage_from_a_new_process(runs: dict[str, Run], loan: LineageSession, tmp_path: Path) -> None:
    run = runs["rerun"]  # rerun: the new process must recompute the φ segment itself
    script = textwrap.dedent(
        f"""
        import json
        from tracing import LineageSession
        als = LineageSession(store={loan.store.uri!r})
        lin = als.load_run({run.id!r}).lineage(rows=[("Reject", 1)])
        print(json.dumps(lin.to_dict()["source_lineage"] | {{"rl": lin.reasoning_rows()}}, default=str))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=spark_child_env()
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    here = run.lineage(rows=[("Reject", 1)])
    assert answer["client"] == json.loads(json.dumps(here.source_rows("client"), default=str))
    assert [r["LoanID"] for r in answer["loan"]] == ["L02"]
    assert answer["rl"][0]["reason"]["attributes"] == ["Debt", "LoanAmount"]


def test_the_cli_reads_a_store_by_the_path_as_written(runs: dict[str, Run], loan: LineageSession) -> None:
    """The path of ODD_FOLDER as a user types it (``%20`` is three characters, ``#`` no fragment)."""
    path = os.path.relpath(loan.store.uri.removeprefix("file:"))
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["runs", "--store", path]) == 0
    assert all(run.id in out.getvalue() for run in runs.values())
    with pytest.raises(LocationError, match=r"holds \* \?, which Spark and DuckDB read as file-name"):
        LineageSession(loan.spark, store="runs?/*")

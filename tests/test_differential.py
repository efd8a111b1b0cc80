"""Differential tests: every task of the suite (tests/tasks_suite.py) under rerun, full and fm.

For each task:
  (a) the three runs give the same output, equal (as a multiset) to what plain Spark computes
      (on a task without a model fm stores nothing, as rerun: one run stands for both; the
      full run is the eager backend's, see (f)), in at most twice as many segments as Spark's
      analyzed plan has operators;
  (b) the augmented lineage of the same targets (two sampled rows; all rows) is identical
      across the strategies: source lineage and reasoning lineage;
  (c) fm stores no more tuples than full, rerun stores none;
  (d) lineage asked from the run read back from the store equals the in-memory run's;
  (e) sanity: lineage is non-empty for every target set, the targets are the rows asked for,
      the lineage of all rows contains that of the pair, and every reported source row exists
      in its table;
  (f) the full run is run with backend="eager" (strategy full, capturing lineage while it
      stores each segment; its strategy's checks ask it with backend="lazy"): its indexes give
      the rerun strategy's lineage, and its forward answers are the inverse of its backward ones;
  (g) that run keeps its indexes both as Parquet pairs and ProvRC-compressed
      (backend="compressed"): every backward and forward answer of the one equals the other's;
  (h) the tracing queries give the same answer row for row whichever engine runs them
      (DuckDB in process or Spark), and every task's runs are answered in process;
  (i) a 4th run of the tasks with models, fm with reasons="lazy" (computed when a question
      reaches them, cached in the run), answers as the fm run does: first, from the cache,
      and with the calls rerun by Spark.

Each task is run once per strategy (a module-scoped, lazy cache) and every test reads those
runs, so ``-k <task id>`` runs only that task. Tasks that hit a known engine bug carry ``bug``
and are marked xfail(strict=True).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from materialization.capture import Capture
from materialization.compile import Compiler
from materialization.locations import local_path
from materialization.settle import settle
from materialization.strategies import stores
from segmenter.errors import LineageError
from segmenter.operators import Function, Join, OuterJoin, Selection, sql_string
from tests.tasks_suite import TASKS, SuiteSentiment, build, generate, plain_dataframe, register_suite_tables
from tracing import LineageSession, Run
from tracing.engines import spark_engine
from tracing.lineage import AugmentedLineage

STRATEGIES = ("rerun", "full", "fm")
CAPTURED = ("eager", "compressed")  # lineage answered from a run's indexes, by their storage
TARGETS: dict[str, dict[str, Any]] = {"pair": {"sample": 2, "seed": 7}, "all": {}}


def task_params(tasks: Any = TASKS) -> list[Any]:
    return [
        pytest.param(t.id, id=t.id, marks=[pytest.mark.xfail(strict=True, reason=t.bug)] if t.bug else [])
        for t in tasks
    ]


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _calls(calls: list[dict[str, Any]]) -> frozenset[tuple[str, int, str, str, str, str]]:
    """Each call with the source rows it read (on every backend, unless a run captured no calls)."""
    return frozenset(
        (r["udf"], r["segment"], _key(r["inputs"]), _key(r["value"]), _key(r["reason"]), _key(r["reads"]))
        for r in calls
    )


def check_rows_apart(run: Run, lin: AugmentedLineage, **how: Any) -> None:
    """Each output row's own answer, kept apart in one question over several rows, is the
    answer to a question about that row alone."""
    assert lin.by_row is not None and len(lin.rows) == len(lin) > 1
    for one in lin.rows:
        (output,) = one.to_dict()["targets"]
        alone = Lineage.of(run.lineage(rows=[output], **how)).alone()
        assert Lineage.of(one).alone() == alone, f"{how}: the answer for {output} differs from its own"


@dataclass(frozen=True)
class Lineage:
    """A comparable view of an AugmentedLineage."""

    targets: list[dict[str, Any]]
    source: dict[str, list[dict[str, Any]]]
    contributing: dict[str, list[dict[str, Any]]]  # the source rows less those only checked
    reasoning: frozenset[tuple[str, int, str, str, str, str]]
    rows: tuple[str, ...] | None  # per output row: its values, source rows (contributing), calls
    # per output row: the segments each source row came by (runs segmented alike agree on them:
    # every backend but confidence, which runs an outer join's rewrite)
    paths: tuple[str, ...] | None = None

    @classmethod
    def of(cls, lin: AugmentedLineage) -> Lineage:
        data = lin.to_dict()
        rows = paths = None
        if data["rows"] is not None:
            rows = tuple(sorted(
                _key([r["output"], r["source"], r["contributing"], sorted(map(_key, _calls(r["reasoning"])))])
                for r in data["rows"]
            ))
            paths = tuple(sorted(_key([r["output"], r["paths"]]) for r in data["rows"]))
        reasoning = _calls(data["reasoning_lineage"])
        # reasoning_rows() must not report the same call twice
        assert len(reasoning) == len(data["reasoning_lineage"])
        contributing = data["contributing_lineage"]
        unchecked = [t for t in contributing if t not in data["control_lineage"]]
        assert all(data["source_lineage"][t] == contributing[t] for t in unchecked)
        return cls(data["targets"], data["source_lineage"], contributing, reasoning, rows, paths)

    def alone(self) -> Lineage:
        """The same answer without its targets' multiplicity (a question by ``rows=`` asks
        about every output row equal to the one given)."""
        unique = sorted({_key(t): t for t in self.targets}.items())
        return Lineage([t for _, t in unique], self.source, self.contributing, self.reasoning, None, None)

    def calls(self) -> frozenset[tuple[str, ...]]:
        """The model calls, without the rows each read."""
        return frozenset(call[:-1] for call in self.reasoning)

    def source_keys(self) -> dict[str, set[str]]:
        return {t: {_key(r) for r in rows} for t, rows in self.source.items() if rows}

    def size(self) -> int:
        return sum(len(rows) for rows in self.source.values())


Asked = tuple[AugmentedLineage, Lineage]  # an answer and its comparable view


@dataclass
class TaskRuns:
    task_id: str
    plain_columns: list[str]
    plain: Counter
    runs: dict[str, Run]
    outputs: dict[str, tuple[list[str], Counter]]
    plan_operators: int  # in Spark's analyzed plan of the task
    scans: tuple[int, int]  # source reads in Spark's optimized plan of the task, and of ours
    _answers: dict[tuple[str, ...], Asked | Exception] = field(default_factory=dict)
    traced: Traced | None = None  # every distinct output row's eager lineage (trace_rows), once

    def lineage(self, strategy: str, target: str, engine: str | None = None) -> Lineage:
        """Lineage of ``target`` (a key of TARGETS) in the ``strategy`` run, asked once
        (lazy runs: with the tracing queries run by ``engine``, by default as a user's are)."""
        return self._asked(strategy, target, engine)[1]

    def answer(self, strategy: str, target: str, engine: str | None = None) -> AugmentedLineage:
        """The answer itself that :meth:`lineage` views, for checks that read more of it."""
        return self._asked(strategy, target, engine)[0]

    def _asked(self, strategy: str, target: str, engine: str | None) -> Asked:
        """``engine`` None: the one a user gets by default (``$AL_TRACING_ENGINE``, else auto)."""
        how = {"backend": strategy} if strategy in CAPTURED else {"backend": "lazy", "engine": engine}
        key = (self.runs[strategy].id, target, *how.values())  # fm may be the rerun run, full the eager
        if key not in self._answers:
            try:
                lin = self.runs[strategy].lineage(**dict(TARGETS[target], **how))
                self._answers[key] = (lin, Lineage.of(lin))
                if strategy not in CAPTURED and engine is None and lin.engine:  # the engine chosen
                    self._answers.setdefault((*key[:-1], lin.engine), self._answers[key])
            except Exception as exc:  # remembered: a failing lineage query fails its tests fast
                self._answers[key] = exc
        found = self._answers[key]
        if isinstance(found, Exception):
            raise found
        return found


class Suite:
    """The suite's tables registered once; each task run under every strategy once (its
    lineage is asked lazily, so a failing lineage query fails only the lineage tests)."""

    def __init__(self, als: LineageSession) -> None:
        self.als = als
        self._runs: dict[str, TaskRuns | Exception] = {}
        self._tables: dict[str, set[str]] = {}
        self._ids: dict[tuple[str, tuple[str, ...]], set[tuple]] = {}

    def runs(self, task_id: str) -> TaskRuns:
        if task_id not in self._runs:
            try:
                self._runs[task_id] = self._run(task_id)
            except Exception as exc:  # remembered, so a failing task fails every test fast
                self._runs[task_id] = exc
        found = self._runs[task_id]
        if isinstance(found, Exception):
            raise found
        return found

    def _run(self, task_id: str) -> TaskRuns:
        plain_df = plain_dataframe(self.als, task_id)
        plain = Counter(tuple(r) for r in plain_df.collect())
        runs: dict[str, Run] = {}
        for s in STRATEGIES:
            if s == "fm" and not runs["rerun"].record["udfs"]:
                # no model: fm stores nothing and runs and answers as rerun does (check_storage
                # asserts the first), so the rerun run stands for it
                runs[s] = runs["rerun"]
            elif s == "full":
                # the eager backend runs strategy full, capturing lineage as it stores each
                # segment: one run serves the full strategy's checks (asked with backend="lazy")
                # and the eager and compressed ones (its indexes kept both ways)
                runs[s] = runs["eager"] = runs["compressed"] = self._eager_run(task_id)
            else:
                runs[s] = self.als.run(build(self.als, task_id), strategy=s)
        outputs = {}
        for s, run in runs.items():
            if s not in CAPTURED:
                out = run.output
                outputs[s] = (out.columns, Counter(tuple(r) for r in out.collect()))
        outputs["eager"] = outputs["full"]
        operators = len(str(plain_df._jdf.queryExecution().analyzed().treeString()).splitlines())
        ours = Compiler(self.als.spark).compile(runs["rerun"].task.root)
        scans = (_scans(plain_df), _scans(ours))
        return TaskRuns(task_id, plain_df.columns, plain, runs, outputs, operators, scans)

    def _eager_run(self, task_id: str) -> Run:
        """backend="eager", its indexes also kept compressed; the compressed indexes are
        composed for every other task and kept per segment (walked along paths) for the rest."""
        compose = [t.id for t in TASKS].index(task_id) % 2 == 0
        both = Capture(storage=("pairs", "provrc"), compose=compose)
        run = self.als.run(build(self.als, task_id), backend="eager", capture=both)
        assert run.strategy == "full"
        return run

    def table_rows(self, table: str) -> set[str]:
        if table not in self._tables:
            self._tables[table] = {_key(r.asDict()) for r in self.als.table(table).collect()}
        return self._tables[table]

    def table_ids(self, table: str, key: tuple[str, ...]) -> set[tuple]:
        """The ids (``key``'s values) of every row of ``table``, read once."""
        if (table, key) not in self._ids:
            self._ids[table, key] = {tuple(row) for row in self.als.table(table).select(*key).collect()}
        return self._ids[table, key]


@pytest.fixture(scope="module")
def suite(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Suite:
    als = LineageSession(spark, store=str(tmp_path_factory.mktemp("differential") / "store"))
    register_suite_tables(als)
    return Suite(als)


def test_suite_covers_the_required_shapes() -> None:
    ids = [t.id for t in TASKS]
    assert len(ids) == len(set(ids)) and len([t for t in TASKS if not t.bug]) >= 15
    for needed in ("q3", "q9", "q10", "q18", "loan_example", "sql_", "except", "subtract", "anti", "semi"):
        assert any(needed in i for i in ids), needed


@pytest.mark.parametrize("task_id", task_params())
def test_outputs_agree_with_plain_spark(suite: Suite, task_id: str) -> None:
    check_outputs(suite.runs(task_id))


@pytest.mark.parametrize("task_id", task_params())
@pytest.mark.parametrize("target", list(TARGETS))
def test_lineage_identical_across_strategies(suite: Suite, task_id: str, target: str) -> None:
    check_lineage_identical(suite.runs(task_id), target)


@pytest.mark.parametrize("task_id", task_params())
def test_storage_fm_within_full_rerun_none(suite: Suite, task_id: str) -> None:
    check_storage(suite.runs(task_id))


@pytest.mark.parametrize("task_id", task_params())
def test_lineage_sane(suite: Suite, task_id: str) -> None:
    check_lineage_sane(suite, suite.runs(task_id))


@pytest.mark.parametrize("task_id", task_params())
def test_loaded_run_gives_the_same_lineage(suite: Suite, task_id: str) -> None:
    """One strategy per task, in turn (each lineage query costs seconds)."""
    strategy = STRATEGIES[[t.id for t in TASKS].index(task_id) % len(STRATEGIES)]
    check_loaded_run(suite, suite.runs(task_id), strategy)


def test_lineage_of_the_null_group_is_the_orders_without_customer(suite: Suite) -> None:
    """A NULL grouping key must be matched null-safely on the way down to the sources."""
    data = generate()
    orders, lineitem = data["orders"], data["lineitem"]
    no_customer = {(k,) for k, c in zip(orders.o_orderkey, orders.o_custkey) if c is None}
    lines = {(o, n) for o, n in zip(lineitem.l_orderkey, lineitem.l_linenumber) if (o,) in no_customer}
    assert no_customer and lines
    lin = suite.runs("null_group_key").runs["rerun"].lineage(where="o_custkey IS NULL")
    assert lin.source_ids("orders") == no_customer
    assert lin.source_ids("lineitem") == lines


def test_a_segment_equal_to_a_stored_one_is_stored_once(suite: Suite) -> None:
    """A WITH query read twice: the fm run writes its φ segment once, and the second
    reference records the first's files (``same_as``, columns by the first's ids). Both
    engines read it so (the in-process answers are compared with rerun's above; the lazy
    reasons' run reads it in normal mode: test_lazy_reasons_answer_as_task_time_reasons)."""
    r = suite.runs("sql_cte_twice_between")
    run = r.runs["fm"]
    stored = run.record["stored"]
    copies = {s: info for s, info in stored.items() if "same_as" in info}
    assert copies, "the CTE's second φ segment should share the first one's files"
    for s, info in copies.items():
        first = stored[str(info["same_as"])]
        assert (info["dir"], info["rows"], info["bytes"]) == (first["dir"], first["rows"], 0)
        assert not (Path(local_path(run.dir) or "") / f"segment-{s}").exists()
    assert run.stored_tuples == sum(info["rows"] for s, info in stored.items() if s not in copies)
    assert Lineage.of(run.lineage(**TARGETS["pair"], engine="spark")) == r.lineage("fm", "pair")
    edited = suite.als.load_run(run.id)
    copy = next(iter(copies))
    edited.record["stored"][copy]["same_as"] = int(copy)  # no segment is stored as itself
    with pytest.raises(LineageError, match=f"stores segment {copy} as segment {copy}'s output.*edited"):
        edited.lineage(**TARGETS["pair"])


def test_a_question_calls_a_model_once_per_argument(suite: Suite, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rerun calls the model again on the rows a question reaches, in both copies of a WITH
    query's φ, and many rows repeat a review: the in-process engine calls it on each
    distinct argument once per question (here 12 texts, 658 calls without that)."""
    r = suite.runs("sql_cte_twice_between")
    expected = r.lineage("rerun", "pair")
    calls: list[tuple] = []
    batch = SuiteSentiment.main_batch

    def counted(self: SuiteSentiment, rows: Any) -> list[Any]:
        calls.extend(rows)
        return batch(self, rows)

    monkeypatch.setattr(SuiteSentiment, "main_batch", counted)
    lin = r.runs["rerun"].lineage(**TARGETS["pair"], engine="in-process")
    assert lin.engine == "in-process" and Lineage.of(lin) == expected
    assert len(calls) > 1 and len(calls) == len(set(calls))


def test_correlated_scalar_subquery_asks_about_the_rows_its_where_keeps(suite: Suite) -> None:
    """TPC-H Q17's shape: ``FROM lineitem, part WHERE <join and part filters> AND l_quantity <
    (SELECT … WHERE l_partkey = p_partkey)``. The other conjuncts go below the outer join Spark
    decorrelates the subquery into, so no join of the tree is a cross product (the eager run
    of Q17 wrote lineitem × part before) and the outer row of a padded row is a kept row."""
    task = suite.als.parse(
        """SELECT sum(l_extendedprice) / 7.0 AS avg_yearly FROM lineitem, part
           WHERE p_partkey = l_partkey AND p_size > 3
             AND l_quantity < (SELECT 0.9 * avg(l_quantity) FROM lineitem WHERE l_partkey = p_partkey)"""
    )
    (outer,) = [n for n in task.root.walk() if isinstance(n, OuterJoin)]
    selections = [n for n in outer.walk() if isinstance(n, Selection)]
    kept = [n for n in selections if any("p_size" in e.sql for e in n.condition)]
    assert kept and all(isinstance(s.child, Join) and not s.child.condition for s in kept)
    assert all({e.sql for e in s.condition} == {e.sql for e in kept[0].condition} for s in kept)
    assert len(kept[0].condition) == 2  # the join condition and p_size > 3; the subquery's test is above
    above = [n for n in task.root.walk() if isinstance(n, Selection) and n not in kept]
    assert [len(s.condition) for s in above] == [1]


def test_where_over_a_left_join_applies_its_kept_side_conjuncts_below(suite: Suite) -> None:
    """TPC-DS q72's shape: a WHERE over a LEFT JOIN. A conjunct reading only the kept side is
    applied below the join, as Spark's optimizer applies it (the eager capture stored q72's
    9-way join unfiltered before); one reading the padded side stays above. A padded row's
    control rows are then the matched rows the WHERE keeps (the capturing backends parse
    alike: the suite's outer joins compare them with the lazy answers)."""
    sql = """SELECT o_orderkey, o_totalprice, l_linenumber
             FROM orders LEFT JOIN lineitem ON l_orderkey = o_orderkey AND l_shipmode = 'AIR'
             WHERE o_totalprice > 100000 AND coalesce(l_linenumber, 0) < 3"""
    task = suite.als.parse(sql)
    (outer,) = [n for n in task.root.walk() if isinstance(n, OuterJoin)]
    below = {e.sql for n in outer.left.walk() if isinstance(n, Selection) for e in n.condition}
    above = {e.sql for n in task.root.walk() if isinstance(n, Selection) for e in n.condition} - below
    sides = [("o_totalprice" in e, "l_linenumber" in e) for e in (*below, *above)]
    assert sides == [(True, False), (False, True)]
    judge = "o_totalprice > 100000 AND suite_sentiment(o_comment) = 'Positive'"
    for written in (  # a conjunct that calls a model stays above the join, by a join or EXISTS
        f"SELECT o_orderkey FROM orders LEFT SEMI JOIN lineitem ON l_orderkey = o_orderkey WHERE {judge}",
        f"SELECT o_orderkey FROM orders WHERE {judge} AND EXISTS "
        "(SELECT 1 FROM lineitem WHERE l_orderkey = o_orderkey)",
    ):
        judged = suite.als.parse(written)
        (semi,) = [n for n in judged.root.walk() if isinstance(n, Join) and n.semi]
        (call,) = [n for n in judged.root.walk() if isinstance(n, Function)]
        assert semi in set(call.walk()) and call not in set(semi.walk()), written
        below = [e.sql for n in semi.inputs[0].walk() if isinstance(n, Selection) for e in n.condition]
        assert len(below) == 1 and "o_totalprice" in below[0], written
    run = suite.als.run(sql, strategy="fm")
    rows = Counter(tuple(r) for r in run.output.collect())
    assert rows == Counter(tuple(r) for r in suite.als.sql(sql).collect())
    padded = min(r for r in rows if r[2] is None)
    lin = run.lineage(rows=[padded])
    data = generate()
    orders, lines = data["orders"], data["lineitem"]
    kept = set(orders.o_orderkey[orders.o_totalprice > 100000])
    air = lines[(lines.l_shipmode == "AIR") & lines.l_orderkey.isin(kept)]
    assert 0 < len(set(air.l_orderkey)) < len(kept) < len(orders)
    assert {r["o_orderkey"] for r in lin.control_rows("orders")} == set(air.l_orderkey)
    assert len(lin.control_rows("lineitem")) == len(air)
    assert [r["o_orderkey"] for r in lin.contributing_rows("orders")] == [padded[0]]


def test_scalar_subquery_of_rows_reads_its_row_and_fails_on_several(suite: Suite) -> None:
    """A scalar subquery that is not an aggregate: its one row is the lineage of its value;
    with several rows the task fails as Spark's query does."""
    one = "(SELECT c_custkey FROM customer WHERE c_name = 'Customer#000000004')"
    sql = f"SELECT o_orderkey, o_totalprice FROM orders WHERE o_custkey = {one}"
    run = suite.als.run(sql, strategy="fm")
    rows = Counter(tuple(r) for r in run.output.collect())
    assert rows and rows == Counter(tuple(r) for r in suite.als.sql(sql).collect())
    lin = run.lineage()
    assert lin.source_ids("customer") == {(4,)} and len(lin.source_ids("orders")) == sum(rows.values())
    with pytest.raises(Exception, match="more than one row returned by a subquery"):
        suite.als.run(sql.replace("c_name = 'Customer#000000004'", "c_custkey < 3"), strategy="fm")


def test_self_join_of_a_grouped_cte_whose_output_repeats_names(suite: Suite) -> None:
    """TPC-DS q11/q39's shapes: a CTE grouped by one column twice, met by itself, so that the
    output names two columns ``o_custkey``. A row is given as a tuple of all its values (a dict
    cannot say which ``o_custkey``, and is refused saying so); both engines and the eager
    backend answer alike."""
    sql = """WITH t AS (SELECT o_custkey, count(*) AS n FROM orders GROUP BY o_custkey, o_custkey)
             SELECT a.o_custkey, a.n, b.o_custkey, b.n FROM t a JOIN t b ON a.o_custkey = b.o_custkey + 1"""
    run = suite.als.run(sql, strategy="fm")
    rows = Counter(tuple(r) for r in run.output.collect())
    assert rows and rows == Counter(tuple(r) for r in suite.als.sql(sql).collect())
    row = min(rows)
    lin = run.lineage(rows=[row])
    orders = generate()["orders"]
    want = {(k,) for k, c in zip(orders.o_orderkey, orders.o_custkey) if c in (row[0], row[2])}
    assert lin.source_ids("orders") == want and len(want) == row[1] + row[3]
    assert Lineage.of(run.lineage(rows=[row], engine="spark")) == Lineage.of(lin)
    eager = suite.als.run(sql, backend="eager")
    assert eager.lineage(rows=[row]).source_ids("orders") == want
    with pytest.raises(LineageError, match="two columns named 'o_custkey': give the row as a tuple"):
        run.lineage(rows=[{"o_custkey": row[0]}])


# --- the checks (shared with tests/cluster_checks.py) -----------------------------------------


def _scans(df: DataFrame) -> int:
    """How many times ``df``'s optimized plan reads a source."""
    plan = str(df._jdf.queryExecution().optimizedPlan().toString())
    return len(re.findall(r"\bRelation |LocalRelation|InMemoryRelation", plan))


def check_outputs(r: TaskRuns) -> None:
    """(a) Every strategy's output is plain Spark's result, as a multiset, same columns; the
    task has no more segments than twice the operators of Spark's analyzed plan (constructs
    traced natively, or rewritten without a copy per use), and its plan reads the sources no
    more often than Spark's own (an anti-join run as one, not as its rewrite T₁ − (T₁ ⋉ T₂))."""
    assert sum(r.plain.values()) > 0, "the task should produce rows"
    assert r.scans[1] <= r.scans[0], f"the task reads its sources {r.scans[1]} times, Spark {r.scans[0]}"
    segments = len(r.runs["rerun"].segments().splitlines())
    assert segments <= 2 * r.plan_operators, f"{segments} segments for {r.plan_operators} plan operators"
    for strategy, (columns, rows) in r.outputs.items():
        assert columns == r.plain_columns, strategy
        assert rows == r.plain, f"{strategy}: output differs from plain Spark"
        assert r.runs[strategy].record["output"]["rows"] == sum(r.plain.values())


def check_lineage_identical(r: TaskRuns, target: str) -> None:
    """(b) The same targets get the same source and reasoning lineage under every strategy,
    each answered in process (the engine chosen by default, whatever the construct), or by
    the engine ``$AL_TRACING_ENGINE`` names (the cluster checks: Spark's executors)."""
    base = r.lineage("rerun", target)
    chosen = os.environ.get("AL_TRACING_ENGINE", "auto")
    engines = {s: r.answer(s, target).engine for s in STRATEGIES}
    assert set(engines.values()) == {"in-process" if chosen == "auto" else chosen}, engines
    for strategy in ("full", "fm"):
        other = r.lineage(strategy, target)
        assert other.targets == base.targets, f"{strategy}: different targets"
        assert other.source == base.source, f"{strategy}: source lineage differs from rerun"
        assert other.reasoning == base.reasoning, f"{strategy}: reasoning lineage differs from rerun"
        assert other.rows == base.rows, f"{strategy}: the answers per output row differ from rerun"
        if r.runs[strategy].segments() == r.runs["rerun"].segments():
            assert other.paths == base.paths, f"{strategy}: the rows' paths differ from rerun"


@pytest.mark.parametrize("task_id", task_params())
def test_tracing_engines_agree(suite: Suite, task_id: str) -> None:
    """(h) Both engines answer the pair alike (model calls rerun in Spark's workers or in
    process), on one strategy's run per task, the strategies in turn: a question traced by
    Spark costs seconds, twice as many on rerun, whose inputs it recomputes (the cluster
    checks ask Spark about every strategy's run). Every strategy's run is answered in process."""
    r = suite.runs(task_id)
    asked = STRATEGIES[[t.id for t in TASKS].index(task_id) % len(STRATEGIES)]
    in_process = r.lineage(asked, "pair", engine="in-process")
    assert in_process == r.lineage(asked, "pair", engine="spark"), f"the engines disagree on {asked}"
    check_rows_apart(r.runs[asked], r.answer(asked, "pair", engine="in-process"), engine="in-process")
    for strategy in STRATEGIES:
        found, expected = r.lineage(strategy, "pair", engine="in-process"), in_process
        if r.runs[strategy].segments() != r.runs[asked].segments():  # one runs an outer join's rewrite
            found, expected = replace(found, paths=None), replace(expected, paths=None)
        assert found == expected, strategy


def test_spark_engine_leaving_many_rows_on_spark_answers_alike(
    suite: Suite, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With only a few rows of each tracing query collected to the driver (as when the
    others are many), the Spark engine gives the in-process answer: a model call above a
    NOT EXISTS, whose subtrahend is traced once for the calls it serves (their few rows
    held here), comes back as a frame and is labelled with each of them (Q21's shape)."""
    sql = """SELECT c_custkey, suite_sentiment(c_comment) AS mood FROM customer c
             LEFT ANTI JOIN orders o ON c.c_custkey = o.o_custkey WHERE c_custkey < 40"""
    run = suite.als.run(sql, strategy="fm")
    in_process = run.lineage(sample=2, seed=7, engine="in-process")
    monkeypatch.setattr(spark_engine, "settle", lambda df: settle(df, small_rows=8))
    on_spark = run.lineage(sample=2, seed=7, engine="spark")
    assert on_spark.engine == "spark" and len(on_spark) == 2 and on_spark.source_rows("orders")
    assert Lineage.of(on_spark) == Lineage.of(in_process)


def check_storage(r: TaskRuns) -> None:
    """(c) fm stores a subset of what full stores; rerun stores nothing."""
    assert r.runs["rerun"].stored_tuples == 0 and r.runs["rerun"].record["stored"] == {}
    assert r.runs["fm"].stored_tuples <= r.runs["full"].stored_tuples
    if not r.runs["rerun"].record["udfs"]:  # no model: fm would store what rerun stores, nothing
        root = r.runs["rerun"].root
        assert not any(stores("fm", seg, root) for seg in root.post_order())
    assert set(r.runs["fm"].record["stored"]) <= set(r.runs["full"].record["stored"])


def check_lineage_sane(suite: Suite, r: TaskRuns) -> None:
    """(e) Targets are what was asked; lineage is non-empty; every reported source row exists
    in its table; the lineage of all rows contains the lineage of the pair. A sample draws
    rows, not values: of a bag, equal rows count as often as they were drawn."""
    for strategy in STRATEGIES:
        pair, everything = r.lineage(strategy, "pair"), r.lineage(strategy, "all")
        assert len(pair.targets) == min(2, sum(r.plain.values()))
        assert not Counter(tuple(t.values()) for t in pair.targets) - r.plain, strategy
        assert Counter(tuple(t.values()) for t in everything.targets) == r.plain
        assert pair.size() > 0 and everything.size() > 0
        for lin in (pair, everything):
            for table, rows in lin.source_keys().items():
                missing = rows - suite.table_rows(table)
                assert not missing, f"{strategy} {table}: rows not in the source table: {sorted(missing)[:3]}"
        all_rows = everything.source_keys()
        for table, rows in pair.source_keys().items():
            assert rows <= all_rows.get(table, set()), f"{strategy} {table}"
        assert pair.calls() <= everything.calls(), strategy  # what a call read depends on the rows asked
    if max(r.plain.values(), default=1) > 1:  # every row but one: each equal row as often as drawn
        n = sum(r.plain.values())
        most = r.runs["fm"].lineage(sample=n - 1, seed=7).to_dict()["targets"]
        drawn = Counter(tuple(t.values()) for t in most)
        assert sum(drawn.values()) == n - 1 and not drawn - r.plain, "a sample matched rows by value"


def check_loaded_run(suite: Suite, r: TaskRuns, strategy: str) -> None:
    """(d) The run read back from the store gives the in-memory run's lineage of the pair."""
    run = r.runs[strategy]
    loaded = suite.als.load_run(run.id)
    assert loaded.strategy == run.strategy and loaded.task == run.task
    assert {**loaded.record, "added": None} == {**run.record, "added": None}  # questions add files
    again = Lineage.of(loaded.lineage(**TARGETS["pair"], backend="lazy"))
    assert again == r.lineage(strategy, "pair"), f"{strategy}: the loaded run gives other lineage"


# --- the eager backend (backend="eager" on the same tasks) ------------------------------------

MAX_TRACED_ROWS = 50  # test_forward_inverts_backward keeps each distinct output row's lineage apart
ALONE_ROWS = 4  # of which the compressed backend is asked about each alone
UDF_TASKS = ("q3_shipping_priority", "two_udfs")  # where forward by model decisions must be checked
LAZY_REASONS_TASKS = (*UDF_TASKS, "udf_projection_under_agg", "loan_example", "sql_cte_twice_between")


@pytest.mark.parametrize("task_id", LAZY_REASONS_TASKS)
def test_lazy_reasons_answer_as_task_time_reasons(suite: Suite, task_id: str) -> None:
    """(i) Reasons computed at question time equal those computed while the task ran."""
    r = suite.runs(task_id)
    run = suite.als.run(build(suite.als, task_id), strategy="fm", reasons="lazy")
    assert run.record["mode"] == "normal" and run.record["stored"]
    for target, ask in TARGETS.items():
        first, again = (Lineage.of(run.lineage(**ask)) for _ in range(2))
        assert first == again == r.lineage("fm", target), target
        assert first.reasoning and all(reason != "null" for *_, reason, _read in first.reasoning)
    assert Lineage.of(run.lineage(**TARGETS["pair"], engine="spark")) == r.lineage("fm", "pair")


@pytest.mark.parametrize("task_id", task_params())
def test_eager_output_agrees_with_plain_spark(suite: Suite, task_id: str) -> None:
    r = suite.runs(task_id)
    columns, rows = r.outputs["eager"]
    assert r.runs["eager"].backend == "eager" and r.runs["eager"].strategy == "full"
    assert columns == r.plain_columns
    assert rows == r.plain, "eager: output differs from plain Spark"
    assert r.runs["eager"].record["output"]["rows"] == sum(r.plain.values())


@pytest.mark.parametrize("task_id", task_params())
@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("base, other", [("rerun", "eager"), ("eager", "compressed")])
def test_captured_equals_traced(suite: Suite, task_id: str, target: str, base: str, other: str) -> None:
    """The eager run's Parquet indexes give the rerun strategy's (tracing queries') lineage,
    and its ProvRC-compressed indexes exactly the Parquet ones'."""
    r = suite.runs(task_id)
    expected, found = r.lineage(base, target), r.lineage(other, target)
    assert found.targets == expected.targets, f"{other}: different targets"
    assert found.source == expected.source, f"{other}: source lineage differs from {base}"
    assert found.reasoning == expected.reasoning, f"{other}: reasoning lineage differs from {base}"
    assert found.rows == expected.rows, f"{other}: the answers per output row differ from {base}"
    # segmented alike (an outer join captured as the one join the lazy backend traces)
    assert r.runs[base].segments() == r.runs[other].segments()
    assert found.paths == expected.paths, f"{other}: the rows' paths differ from {base}"


@pytest.mark.parametrize("backend", ["lazy", *CAPTURED])
def test_each_source_row_names_the_path_it_came_by(suite: Suite, backend: str) -> None:
    """A table read by two segments: each row says by which it reached the output row. In
    EXCEPT ALL, the rows of the left side that give the row (same l_suppkey, returned) come by
    the left segment, all of the right side (control lineage) by the right one; in
    sql_subqueries, all customers come by the scalar max(c_acctbal) subquery's segment."""
    r = suite.runs("except_all_suppliers")
    run = r.runs["fm" if backend == "lazy" else "eager"]
    how = {} if backend == "lazy" else {"backend": backend}
    lin = run.lineage(rows=[{"l_suppkey": 12}], **how)
    first = lin.first_rows("lineitem", "control", 3)  # the report's folded list
    assert "lineitem" in lin.deferred  # not every checked row read for it (in process)
    by_path: dict[str, set[tuple[int, int]]] = {}
    for found in lin.paths("lineitem"):
        for path in found["paths"]:
            by_path.setdefault(" ".join(map(str, path)), set()).add(tuple(found["row"].values()))
    rows = suite.als.table("lineitem").collect()
    returned = {(x.l_orderkey, x.l_linenumber) for x in rows if x.l_returnflag == "R" and x.l_suppkey == 12}
    by_truck = {(x.l_orderkey, x.l_linenumber) for x in rows if x.l_shipmode in ("TRUCK", "RAIL")}
    assert by_path == {"0 1": returned, "0 2": by_truck}
    # the text leads with the contributing rows (the left side's), the right side counted
    shown = [line for line in str(lin).splitlines() if "(via segments" in line]
    assert len(shown) == min(10, len(returned)) and all("(via segments 0 → 1" in line for line in shown)

    def ids(found: list[dict[str, Any]]) -> set[tuple[int, int]]:
        return {(x["l_orderkey"], x["l_linenumber"]) for x in found}

    assert ids(lin.contributing_rows("lineitem")) == returned
    assert ids(lin.control_rows("lineitem")) == by_truck - returned
    assert lin.checks("lineitem") == [words := "the EXCEPT ALL of lineitem against lineitem"]  # in words
    assert lin.part_counts("lineitem") == (len(returned), len(by_truck - returned))  # counted in Arrow
    assert first == lin.first_rows("lineitem", "control", 3) == lin.control_rows("lineitem")[:3]
    assert f"+ {len(by_truck - returned)} row(s) only checked, by {words}" in str(lin)

    r = suite.runs("sql_subqueries")
    run = r.runs["fm" if backend == "lazy" else "eager"]
    one = run.lineage(sample=1, seed=3, **how)
    (scalar,) = [s for s in run.root.walk() if s.pattern() == "α" and s.entries() == {"customer": [s.id]}]
    top = [found["row"]["c_custkey"] for found in one.paths("customer") if one.routes[scalar.id] in
           map(tuple, found["paths"])]
    assert sorted(top) == sorted(x.c_custkey for x in suite.als.table("customer").collect())
    assert json.loads(one.to_json())["rows"][0]["paths"]["customer"] == one.paths("customer")


@dataclass
class Traced:
    """Backward lineage of every distinct output row of an eager run, one row at a time."""

    columns: list[str]
    bag: Counter
    keys: dict[str, tuple[str, ...]]  # table -> the attributes its ids are made of
    source: dict[tuple, dict[str, set[tuple]]]  # output row -> table -> ids of its source rows
    calls: dict[tuple, set[tuple[str, str, str]]]  # output row -> {(udf, value name, value)}

    def depending_on_row(self, table: str, *row_ids: tuple) -> Counter:
        """The output rows whose lineage holds any of ``row_ids``, as a bag."""
        return Counter({o: n for o, n in self.bag.items() if self.source[o].get(table, set()) & set(row_ids)})

    def depending_on_calls(self, udf: str, value_name: str, value: str) -> Counter:
        return Counter({o: n for o, n in self.bag.items() if (udf, value_name, value) in self.calls[o]})

    def answer(self, rows: list[dict[str, Any]]) -> Counter:
        """A forward answer's rows as a multiset of output tuples."""
        return Counter(tuple(d[c] for c in self.columns) for d in rows)


def trace_rows(r: TaskRuns) -> Traced:
    """Every distinct output row's eager backward lineage, kept apart in one question about
    all of them (skips tasks with many rows); the compressed indexes asked about a few rows
    alone, spread over the sorted rows, must give them the same (test_captured_equals_traced
    compares both backends on all rows at once)."""
    run = r.runs["eager"]
    columns, bag = r.outputs["eager"]
    if len(bag) > MAX_TRACED_ROWS:
        pytest.skip(f"{len(bag)} distinct output rows: tracing each one alone is too slow for this suite")
    if r.traced is not None:
        return r.traced
    source: dict[tuple, dict[str, set[tuple]]] = {}
    calls: dict[tuple, set[tuple[str, str, str]]] = {}
    keys: dict[str, tuple[str, ...]] = {}
    whole = r.answer("eager", "all")
    apart = {_key(one.to_dict()["targets"][0]): one for one in (whole.rows if len(whole) > 1 else [whole])}
    ordered = sorted(bag, key=_key)
    alone = set(ordered[:: max(1, len(ordered) // ALONE_ROWS)][:ALONE_ROWS])
    for o in ordered:
        lin = apart[_key(dict(zip(columns, o)))]
        if o in alone:
            same = Lineage.of(run.lineage(rows=[dict(zip(columns, o))], backend="compressed")).alone()
            assert same == Lineage.of(lin).alone(), f"compressed: lineage of {o} differs from eager's, apart"
        keys.update(lin.keys)
        source[o] = {t: lin.source_ids(t) for t in lin.tables}
        names = {(e.udf, e.segment): e.value for e in lin.reasoning}
        calls[o] = {
            (c["udf"], names[(c["udf"], c["segment"])], _key(c["value"])) for c in lin.reasoning_rows()
        }
    r.traced = Traced(columns, bag, keys, source, calls)
    return r.traced


def _sql_literal(value: Any) -> str:
    """A Spark SQL literal of a JSON value (what a model returned)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return sql_string(value)
    if isinstance(value, list):  # a model's list output: one row per item it found
        return f"array({', '.join(_sql_literal(v) for v in value)})"
    return repr(value)


@pytest.mark.parametrize("task_id", task_params())
def test_forward_inverts_backward(suite: Suite, task_id: str) -> None:
    """forward(S) = { output rows o : backward(o) ∩ S ≠ ∅ }, as a bag, on the eager run: for up
    to 3 source rows per captured table that are in some row's lineage and one that is in
    none, each alone from the Parquet pairs and all four at once from the compressed
    indexes (test_compressed compares the two storages' forward answers id by id); and, for
    every UDF, the calls giving each value it gave, the storages in turn."""
    r = suite.runs(task_id)
    traced = trace_rows(r)
    run = r.runs["eager"]
    everything = r.lineage("eager", "all")
    for table in sorted(run.record["capture"]["plan"]):
        key = traced.keys[table]
        seen = set().union(*(s.get(table, set()) for s in traced.source.values()))
        in_all = {tuple(row[k] for k in key) for row in everything.source.get(table, [])}
        assert seen == in_all, f"{table}: the lineage of all rows is not the union of the rows' lineage"
        every = suite.table_ids(table, key)
        picked = sorted(seen, key=_key)[:3] + sorted(every - seen, key=_key)[:1]
        for row_id in picked:
            expected = traced.depending_on_row(table, row_id)
            found = run.forward(table=table, ids=[row_id], backend="eager").rows()
            assert traced.answer(found) == expected, f"eager: forward of {table} {row_id}"
        expected = traced.depending_on_row(table, *picked)
        found = run.forward(table=table, ids=picked, backend="compressed").rows()
        assert traced.answer(found) == expected, f"compressed: forward of {table} {picked}"
    used = {(udf, name) for calls in traced.calls.values() for udf, name, _ in calls}
    for udf in sorted({u for u, _ in used}):
        names = {name for u, name in used if u == udf}
        if len(names) > 1:
            continue  # one where= cannot name the value in calls that name it differently
        (name,) = names
        values = sorted({v for calls in traced.calls.values() for u, _, v in calls if u == udf})
        for k, value in enumerate(values[:3]):
            plain = json.loads(value)
            cond = f"`{name}` <=> {_sql_literal(plain)}"
            expected = traced.depending_on_calls(udf, name, value)
            assert expected, f"{udf}: a value seen in the lineage must have dependent rows"
            backend = CAPTURED[k % 2]  # the storages in turn: they give one answer (see above)
            found = run.forward(udf=udf, where=cond, backend=backend).rows()
            assert traced.answer(found) == expected, f"{backend}: forward of {udf} calls where {cond}"


@pytest.mark.parametrize("task_id", UDF_TASKS)
def test_forward_by_model_decisions(suite: Suite, task_id: str) -> None:
    """forward(udf=..., where=<on the value>) on a task with UDFs: the output rows whose
    reasoning lineage holds such a call, and every row for the union of all values."""
    r = suite.runs(task_id)
    run = r.runs["eager"]
    traced = trace_rows(r)
    by_udf: dict[str, set[tuple[str, str]]] = {}
    for calls in traced.calls.values():
        for udf, name, value in calls:
            by_udf.setdefault(udf, set()).add((name, value))
    assert by_udf, "the task's rows must have reasoning lineage"
    for udf, found in sorted(by_udf.items()):
        (name,) = {n for n, _ in found}
        values = sorted(v for _, v in found)
        cond = " OR ".join(f"`{name}` <=> {_sql_literal(json.loads(v))}" for v in values)
        fwd = run.forward(udf=udf, where=cond)
        expected = Counter({o: n for o, n in traced.bag.items() if any(c[0] == udf for c in traced.calls[o])})
        assert traced.answer(fwd.rows()) == expected, f"forward of every call of {udf}"
        fwd = run.forward(udf=udf, where="FALSE")
        assert len(fwd) == 0 and fwd.rows() == []

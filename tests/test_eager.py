"""The eager lineage backend (``als.run(task, backend="eager")``): the paper's golden answer,
pruning and granularity of the capture, control lineage of differences, bad input, runs read
back from the store, and answers that need no Spark job.

Eager == lazy and forward == the inverse of backward over the whole task suite are checked in
tests/test_differential.py (test_captured_equals_traced, test_forward_inverts_backward); the
oracle comparison in tests/test_oracle.py. Every run here is made once per module, when a test
first needs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cda_workload.workloads.loan_example import loan_task
from materialization import duck
from materialization.capture import LID, Capture, CaptureError, distinct_as_captured, equated_columns, packing
from materialization.index_frames import REF, SPILL_PREFIX, DuckFrames, SparkFrames, spill_folder
from materialization.integrity import IntegrityError, verify
from materialization.locations import local_path
from materialization.store import SOURCE_META, StoreError
from segmenter.errors import LineageError
from segmenter.operators import Expr
from tests.golden import LOAN_OUTPUT, assert_reject_lineage
from tests.tasks_suite import generate, register_suite_tables
from tests.test_differential import Lineage
from tracing import LineageSession, Run
from tracing.errors import NotCapturedError, TargetNotFoundError
from tracing.forward import ForwardLineage

TABLES = ("customer", "orders", "lineitem")
DATA = generate()
LINEITEM = DATA["lineitem"]
ORDERS = DATA["orders"]
CUSTOMER = DATA["customer"]
RETURNED = {
    (o, n) for o, n, f in zip(LINEITEM.l_orderkey, LINEITEM.l_linenumber, LINEITEM.l_returnflag) if f == "R"
}


# --- tasks -----------------------------------------------------------------------------------


def q3_like(als: LineageSession) -> DataFrame:
    """TPC-H Q3's shape without a UDF: customer ⋈ orders ⋈ lineitem, σ, revenue per order."""
    customer, orders, lineitem = (als.table(t) for t in TABLES)
    joined = customer.join(orders, F.col("c_custkey") == F.col("o_custkey")).join(
        lineitem, F.col("l_orderkey") == F.col("o_orderkey")
    )
    picked = joined.filter(
        F.col("c_mktsegment").isin("BUILDING", "AUTOMOBILE", "MACHINERY")
        & (F.col("o_orderdate") < F.lit("1997-01-01").cast("date"))
    )
    return picked.groupBy("l_orderkey", "o_orderdate", "o_shippriority").agg(
        F.sum(F.col("l_extendedprice") * (1 - F.col("l_discount"))).alias("revenue")
    )


def quantity_by_priority_and_flag(als: LineageSession) -> DataFrame:
    """orders ⋈ lineitem grouped; some orders have a NULL o_custkey (a NULL coarse id)."""
    orders, lineitem = als.table("orders"), als.table("lineitem")
    joined = orders.join(lineitem, F.col("o_orderkey") == F.col("l_orderkey"))
    return joined.groupBy("o_orderpriority", "l_returnflag").agg(F.sum("l_quantity").alias("qty"))


def quantity_rollup_by_priority_and_flag(als: LineageSession) -> DataFrame:
    """ε and α over orders ⋈ lineitem: each line item in its three grouping sets' rows."""
    joined = als.table("orders").join(als.table("lineitem"), F.col("o_orderkey") == F.col("l_orderkey"))
    return joined.rollup("o_orderpriority", "l_returnflag").agg(F.sum("l_quantity").alias("qty"))


def orders_without_returns(als: LineageSession, flag: str = "R") -> DataFrame:
    """T1 − T2: the orders without a line of return flag ``flag`` (T2 is empty for 'X')."""
    orders, lineitem = als.table("orders"), als.table("lineitem")
    returned = lineitem.filter(F.col("l_returnflag") == flag).select("l_orderkey")
    return orders.select(F.col("o_orderkey").alias("orderkey")).subtract(returned)


def air_orders_without_returns(als: LineageSession) -> DataFrame:
    """T1 − T2 over the same table: orders with a line shipped by AIR but no returned line."""
    lineitem = als.table("lineitem")
    air = lineitem.filter(F.col("l_shipmode") == "AIR").select("l_orderkey")
    return air.subtract(lineitem.filter(F.col("l_returnflag") == "R").select("l_orderkey"))


def priorities_without_returns(als: LineageSession) -> DataFrame:
    """A difference below a join and an aggregation: its control lineage must reach the top."""
    kept = orders_without_returns(als)
    orders = als.table("orders")
    joined = orders.join(kept, F.col("o_orderkey") == F.col("orderkey"))
    return joined.groupBy("o_orderpriority").agg(F.count(F.lit(1)).alias("n"))


def customers_by_orders(als: LineageSession) -> DataFrame:
    """⟕ under two aggregations (TPC-H Q13's shape): a customer without an order is a
    padded row, which depends on the join's check."""
    customer, orders = als.table("customer"), als.table("orders")
    joined = customer.join(orders, F.col("c_custkey") == F.col("o_custkey"), "left")
    per_customer = joined.groupBy("c_custkey").agg(F.count("o_orderkey").alias("n"))
    return per_customer.groupBy("n").agg(F.count(F.lit(1)).alias("customers"))


def quantity_by_flag(als: LineageSession) -> DataFrame:
    """α over a scan (TPC-H Q1's shape): each line item is in one group's lineage."""
    return als.table("lineitem").groupBy("l_returnflag").agg(F.sum("l_quantity").alias("qty"))


def quantity_by_lower_flag(als: LineageSession) -> DataFrame:
    """α over a scan whose key DuckDB does not evaluate as Spark does (``lower``: not on the
    allow-list): its lineage is written by a second Spark pass, not derived."""
    lineitem = als.table("lineitem")
    return lineitem.groupBy(F.lower("l_returnflag").alias("flag")).agg(F.sum("l_quantity").alias("qty"))


def each_order_twice(als: LineageSession) -> DataFrame:
    """γ over a scan: every line item gives two equal rows (one lineage id, one tag)."""
    return als.table("lineitem").select("l_orderkey", F.explode(F.array(F.lit(1), F.lit(1))).alias("k"))


def above_returned_average(als: LineageSession) -> DataFrame:
    """An uncorrelated scalar subquery: every order priced above the average returned line
    depends on all returned lines."""
    return als.sql(
        "SELECT o_orderkey FROM orders WHERE o_totalprice > "
        "(SELECT avg(l_extendedprice) FROM lineitem WHERE l_returnflag = 'R')"
    )


def gadgets_per_kind(als: LineageSession) -> DataFrame:
    """⋈ and α over a table whose one-column key holds a NULL, and one whose key holds none."""
    joined = als.table("gadget").join(als.table("customer"), F.col("g_cust") == F.col("c_custkey"))
    return joined.groupBy("kind").agg(F.count(F.lit(1)).alias("n"))


SHELVES = [(-3, -(2**40), "a"), (2, 7, "a"), (0, 0, "b")]  # a key of two integer columns


def shelves_per_kind(als: LineageSession, how: str = "inner") -> DataFrame:
    """⋈ (or ⋉: the lineage written by a second pass) and α over a table keyed by two integer
    columns, negative values and 42 bits of range included."""
    joined = als.table("shelf").join(als.table("gadget"), "kind", how)
    return joined.groupBy("kind").agg(F.count(F.lit(1)).alias("n"))


def top_two_orders_per_segment(als: LineageSession) -> DataFrame:
    """ω over ω (a whole-partition sum, then a ranking that σ keeps the first two of), ⋈ and
    α above: each customer's two largest orders, whose ranking read the customer's orders
    before them and whose total read them all."""
    return als.sql(
        """SELECT c_mktsegment, count(*) AS n, sum(total) AS spent FROM customer JOIN (
             SELECT o_custkey, o_totalprice, total, row_number() OVER (
                 PARTITION BY o_custkey ORDER BY o_totalprice DESC, o_orderkey) AS k
             FROM (SELECT o_orderkey, o_custkey, o_totalprice,
                          sum(o_totalprice) OVER (PARTITION BY o_custkey) AS total FROM orders) o) t
           ON c_custkey = o_custkey WHERE k <= 2 GROUP BY c_mktsegment"""
    )


RUNS: dict[str, tuple[Callable[[LineageSession], Any], dict[str, Any]]] = {
    "loan": (loan_task, {}),
    "loan_no_functions": (loan_task, {"capture": Capture(functions=False)}),
    "q3": (q3_like, {}),
    "q3_tagged": (q3_like, {}),
    "q3_lineitem_backward": (
        q3_like,
        {"capture": Capture(tables=("lineitem",), directions=("backward",))},
    ),
    "q3_forward_only": (q3_like, {"capture": Capture(directions=("forward",))}),
    "q3_per_supplier": (q3_like, {"capture": Capture(granularity={"lineitem": ("l_suppkey",)})}),
    "orders_per_customer": (
        quantity_by_priority_and_flag,
        {"capture": Capture(granularity={"orders": ("o_custkey",)})},
    ),
    "by_flag": (quantity_by_flag, {}),
    "by_flag_per_supplier": (
        quantity_by_flag,
        {"capture": Capture(granularity={"lineitem": ("l_suppkey",)})},
    ),
    "each_order_twice": (each_order_twice, {}),
    "rollup_of_join": (quantity_rollup_by_priority_and_flag, {}),
    "by_lower_flag": (quantity_by_lower_flag, {}),
    "gadgets": (gadgets_per_kind, {}),
    "gadgets_derived": (gadgets_per_kind, {}),
    "shelves": (shelves_per_kind, {}),
    "shelves_semi": (lambda als: shelves_per_kind(als, "left_semi"), {}),
    "shelves_semi_derived": (lambda als: shelves_per_kind(als, "left_semi"), {}),
    "difference": (orders_without_returns, {}),
    "difference_below_agg": (priorities_without_returns, {}),
    "difference_below_agg_tagged": (priorities_without_returns, {}),
    "difference_same_table": (air_orders_without_returns, {}),
    "empty_subtrahend": (lambda als: orders_without_returns(als, "X"), {}),
    "above_returned_average": (above_returned_average, {}),
    "customers_by_orders": (customers_by_orders, {}),
    "customers_by_orders_tagged": (customers_by_orders, {}),
    "windows": (top_two_orders_per_segment, {}),
    "windows_tagged": (top_two_orders_per_segment, {}),
}


# runs whose tags ride through the task, not derived after it (where the suite's small local
# snapshots would have them derived): these check the tags' layouts in the task
TAGGED = frozenset(
    {"gadgets", "shelves", "shelves_semi", "q3_tagged"}
    | {"difference_below_agg_tagged", "customers_by_orders_tagged", "windows_tagged"}
)


@contextmanager
def tags_in_the_task(name: str) -> Iterator[None]:
    """As a capture over snapshots too large to derive from in process runs."""
    with pytest.MonkeyPatch.context() as patch:
        if name in TAGGED:
            patch.setattr("materialization.execute.DERIVED_BYTES", -1)
        yield


class Runs:
    """Each of :data:`RUNS` run eagerly once, on first use."""

    def __init__(self, als: LineageSession) -> None:
        self.als = als
        self._runs: dict[str, Run] = {}

    def __getitem__(self, name: str) -> Run:
        if name not in self._runs:
            build, options = RUNS[name]
            with tags_in_the_task(name):
                self._runs[name] = self.als.run(build(self.als), backend="eager", **options)
        return self._runs[name]


@pytest.fixture(scope="module")
def als(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> LineageSession:
    session = LineageSession(spark, store=str(tmp_path_factory.mktemp("eager") / "store"))
    register_suite_tables(session, tables=TABLES)  # and the loan example's tables
    rows = [(None, "a", 1), (1, "a", 2), (2, "b", 2)]
    gadgets = spark.createDataFrame(rows, "g_id int, kind string, g_cust int")
    session.register_table("gadget", gadgets, key="g_id")
    shelves = spark.createDataFrame(SHELVES, "s_bin smallint, s_slot bigint, kind string")
    session.register_table("shelf", shelves, key=["S_BIN", "s_slot"])  # a key in another case
    return session


@pytest.fixture(scope="module")
def runs(als: LineageSession) -> Runs:
    return Runs(als)


# --- helpers ---------------------------------------------------------------------------------


def bag(run: Run) -> Counter:
    return Counter(tuple(r) for r in run.output.collect())


def answer(run: Run, fwd: ForwardLineage) -> Counter:
    """A forward answer's rows as a multiset of output tuples."""
    names = run.output.columns
    found = Counter(tuple(d[c] for c in names) for d in fwd.rows())
    assert len(fwd) == sum(found.values())
    return found


@contextmanager
def spark_jobs() -> Iterator[list[int]]:
    """Counts the Spark jobs started (from any thread) inside the block: job ids are
    consecutive, so the jobs between two marker jobs are the block's."""
    spark = SparkSession.getActiveSession()
    assert spark is not None
    sc = spark.sparkContext
    tracker = sc.statusTracker()

    def marker(group: str) -> list[int]:
        sc.setJobGroup(group, "eager test marker")
        try:
            spark.range(1).collect()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
            sc.setLocalProperty("spark.job.description", None)
        for _ in range(200):  # the status store hears of jobs asynchronously
            found = tracker.getJobIdsForGroup(group)
            if found:
                return sorted(found)
            time.sleep(0.05)
        raise AssertionError(f"marker job of {group} never reported")

    stamp = time.time_ns()
    before = marker(f"eager-before-{stamp}")
    counted: list[int] = []
    yield counted
    after = marker(f"eager-after-{stamp}")
    counted.append(after[0] - before[-1] - 1)


# --- the paper's example ---------------------------------------------------------------------


def test_loan_example_gives_the_golden_lineage(runs: Runs) -> None:
    """Fig. 4 from the indexes: AL(⟨Reject, 1⟩) exactly as published."""
    run = runs["loan"]
    assert run.backend == "eager" and run.strategy == "full"
    assert sorted(bag(run).elements()) == LOAN_OUTPUT
    lin = run.lineage(rows=[("Reject", 1)])
    assert_reject_lineage(lin)
    assert lin.reasoning_rows()[0]["segment"] == 1
    assert lin.scope is None  # nothing pruned or coarsened
    accept = run.lineage(where="Judge = 'Accept'")
    assert accept.source_ids("client") == {("0001",), ("0003",)}
    assert accept.source_ids("loan") == {("L01",), ("L03",)}  # L04 (October) was filtered out
    assert {r["value"] for r in accept.reasoning_rows()} == {"Accept"}


def test_loan_example_forward(runs: Runs) -> None:
    """Which results does a loan, a client or a model decision feed?"""
    run = runs["loan"]
    assert answer(run, run.forward(table="loan", ids=["L02"])) == Counter({("Reject", 1): 1})
    assert answer(run, run.forward(table="loan", ids=[("L04",)])) == Counter()  # filtered out
    assert answer(run, run.forward(table="loan", ids=["L06"])) == Counter()  # client without debt
    assert answer(run, run.forward(table="client", ids=["0001", "0002"])) == Counter(
        {("Accept", 2): 1, ("Reject", 1): 1}
    )
    big = run.forward(table="loan", where="LoanAmount = 9000")  # L04 (October) and L07 (Pia)
    assert answer(run, big) == Counter({("Marginal", 1): 1})
    assert {r["LoanID"] for r in big.to_dict()["given"]} == {"L04", "L07"}
    rejected = run.forward(udf="credit_rules", where="Judge = 'Reject'")
    assert answer(run, rejected) == Counter({("Reject", 1): 1})
    by_input = run.forward(udf="credit_rules", where="Income > 3000")  # Havey and Kim
    assert answer(run, by_input) == Counter({("Accept", 2): 1})
    by_reason = run.forward(udf="credit_rules", where="Judge_reason.debt_ratio > 0.5")  # Joa: 0.61
    assert answer(run, by_reason) == Counter({("Reject", 1): 1})
    assert "1 output row(s) depend on" in str(rejected)


def test_loan_example_without_reasoning_capture(runs: Runs) -> None:
    """functions=False: source lineage as published, no reasoning lineage from the indexes and
    no forward by model decisions; the lazy backend still gives the reasons."""
    run = runs["loan_no_functions"]
    assert sorted(bag(run).elements()) == LOAN_OUTPUT
    lin = run.lineage(rows=[("Reject", 1)])
    assert lin.tables == ["client", "debt", "loan"]
    assert lin.source_ids("loan") == {("L02",)} and lin.source_ids("client") == {("0002",)}
    assert lin.reasoning_rows() == []
    with pytest.raises(NotCapturedError, match="reasoning"):
        run.forward(udf="credit_rules", where="Judge = 'Reject'")
    assert_reject_lineage(run.lineage(rows=[("Reject", 1)], backend="lazy"))


# --- pruning ---------------------------------------------------------------------------------


def test_pruned_to_one_table_and_backward(runs: Runs) -> None:
    full, pruned = runs["q3"], runs["q3_lineitem_backward"]
    assert bag(pruned) == bag(full)
    assert set(pruned.record["capture"]["indexes"]) == {"src-lineitem"}
    lin = pruned.lineage(sample=3, seed=5)
    assert set(lin.source) == {"lineitem"} and lin.tables == ["lineitem"]
    assert "lineitem" in (lin.scope or "")
    whole = full.lineage(sample=3, seed=5)
    assert whole.tables == ["customer", "lineitem", "orders"]
    assert lin.source_rows("lineitem") == whole.source_rows("lineitem")
    assert lin.source_ids("lineitem")
    with pytest.raises(NotCapturedError, match=r"forward.*backend='lazy'"):
        pruned.forward(table="lineitem", ids=[(1, 1)])
    with pytest.raises(NotCapturedError, match=r"'orders'.*captured: \['lineitem'\]"):
        pruned.forward(table="orders", ids=[1])
    # the lazy backend answers the other tables on the same run
    lazy = pruned.lineage(sample=3, seed=5, backend="lazy")
    assert Lineage.of(lazy) == Lineage.of(whole)


def test_forward_only_capture(runs: Runs) -> None:
    full, fwd_only = runs["q3"], runs["q3_forward_only"]
    with pytest.raises(NotCapturedError, match=r"backward.*backend='lazy'"):
        fwd_only.lineage(sample=2, seed=7)
    lazy = fwd_only.lineage(sample=2, seed=7, backend="lazy")
    assert Lineage.of(lazy) == Lineage.of(full.lineage(sample=2, seed=7))
    for table, row_id in (("orders", 1), ("lineitem", (1, 1)), ("customer", 4)):
        assert answer(fwd_only, fwd_only.forward(table=table, ids=[row_id])) == answer(
            full, full.forward(table=table, ids=[row_id])
        ), (table, row_id)


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_composition_joins_each_child_row_once(spark: SparkSession, engine: str) -> None:
    """A capture names a child row once per input row that carried it (a group's rows all
    name the subquery row they were probed against). Composed through the child's pairs,
    those repeats multiplied: TPC-DS q70's build spilled tens of GB for 3 output rows."""
    pairs = [(1, 10)] * 3 + [(2, 10)] * 2
    below = [(10, "a"), (10, "b")] * 2
    if engine == "duckdb":
        frames: Any = DuckFrames()

        def rel(rows: list[tuple[Any, Any]], second: str) -> str:
            values = ", ".join(f"({a}, {b!r})" for a, b in rows)
            return f'SELECT * FROM (VALUES {values}) t("{LID}", "{second}")'
    else:
        frames = SparkFrames(spark)

        def rel(rows: list[tuple[Any, Any]], second: str) -> DataFrame:
            return spark.createDataFrame(rows, [LID, second])

    try:
        through = frames.arrow(frames.through(rel(pairs, REF), rel(below, "attr"))).to_pylist()
        kept = frames.arrow(frames.keep(rel(below, "attr"))).to_pylist()
    finally:
        frames.release()
    assert sorted((r[LID], r["attr"]) for r in through) == [(1, "a"), (1, "b"), (2, "a"), (2, "b")]
    assert sorted((r[LID], r["attr"]) for r in kept) == [(10, "a"), (10, "b")]


@pytest.mark.parametrize(
    ("name", "table", "row_id"),
    [
        ("loan", "loan", "L02"),
        ("difference_below_agg", "orders", 1),
        ("q3", "lineitem", (43, 1)),
        ("shelves", "shelf", (-3, -(2**40))),
    ],
)
def test_indexes_composed_by_spark_answer_as_duckdbs(
    als: LineageSession, runs: Runs, monkeypatch: pytest.MonkeyPatch, name: str, table: str, row_id: Any
) -> None:
    """A non-local store or a capture over ``IN_PROCESS_BYTES`` has Spark compose the indexes
    (the suite's stores are local and small: the bound is lowered here). Every row's answer,
    its paths, model calls and control lineage, and a forward answer, as DuckDB's; α over
    joined sources, whose lineage the builder derives, by a Spark pass as by DuckDB; a packed
    key unpacked by Spark as by DuckDB."""
    build, options = RUNS[name]
    monkeypatch.setattr("materialization.index_frames.IN_PROCESS_BYTES", -1)
    by_spark = als.run(build(als), backend="eager", **options)
    by_duckdb = runs[name]
    written = by_spark.record["capture"]["indexes"][f"src-{table}"]
    assert "deferred" not in written["forward"]  # Spark wrote it with the task
    assert Lineage.of(by_spark.lineage()) == Lineage.of(by_duckdb.lineage())
    fwd = {run: answer(run, run.forward(table=table, ids=[row_id])) for run in (by_spark, by_duckdb)}
    assert fwd[by_spark] == fwd[by_duckdb] and fwd[by_spark]


def test_interrupt_all_stops_a_running_build_query() -> None:
    """A time limit (the TPC-DS coverage benchmark's) stops the DuckDB query of an index
    build or an in-process question, which cancelling Spark's jobs does not reach."""
    con, closed = duck.connect(), duck.connect()
    closed.close()  # interrupting a closed connection is no error
    errors: list[BaseException] = []

    def endless() -> None:
        try:
            con.execute("SELECT count(*) FROM range(1000000000000) a, range(1000) b").fetchall()
        except BaseException as exc:  # the one expected: DuckDB's interrupt
            errors.append(exc)

    worker = threading.Thread(target=endless)
    worker.start()
    time.sleep(0.5)
    duck.interrupt_all()
    worker.join(timeout=10)
    assert not worker.is_alive() and len(errors) == 1 and "nterrupt" in str(errors[0])


def test_a_killed_builds_spill_folder_is_removed_by_the_next_build() -> None:
    """An index build spills into a folder named for its process; the next build removes
    those of processes that are gone, and keeps a live one's."""
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    tmp = Path(tempfile.gettempdir())
    stale = tmp / f"{SPILL_PREFIX}{int(ended.stdout)}-x"
    live = tmp / f"{SPILL_PREFIX}{os.getpid()}-x"
    for folder in (stale, live):
        folder.mkdir()
        (folder / "spilled.tmp").write_bytes(b"0" * 1024)
    try:
        fresh = Path(spill_folder())
        assert not stale.exists() and live.exists() and fresh.name.startswith(f"{SPILL_PREFIX}{os.getpid()}-")
        fresh.rmdir()
    finally:
        shutil.rmtree(stale, ignore_errors=True)
        shutil.rmtree(live, ignore_errors=True)


def test_forward_index_is_sorted_by_the_first_forward_question(
    als: LineageSession, runs: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The capture leaves the forward index to the first forward question (issue 14); until
    then, and where the run cannot be written, the backward index answers; the index sorted
    then is listed in the run's record, checked against it and by `al verify`."""
    run = als.run(q3_like(als), backend="eager")
    assert run.record["capture"]["indexes"]["src-lineitem"]["forward"]["deferred"]
    folder = Path(local_path(run.dir) or "", "forward", "src-lineitem")
    reference = runs["q3_forward_only"]  # its forward index was written by the capture
    where = "l_orderkey % 5 = 0"
    expected = answer(reference, reference.forward(table="lineitem", where=where))
    assert expected
    monkeypatch.setattr("tracing.forward_index.os.access", lambda path, mode: False)  # read-only
    assert answer(run, run.forward(table="lineitem", where=where)) == expected
    assert not folder.exists()
    monkeypatch.undo()
    assert answer(run, als.load_run(run.id).forward(table="lineitem", where=where)) == expected
    (part,) = folder.glob("*.parquet")
    written = part.stat().st_mtime_ns
    assert answer(run, als.load_run(run.id).forward(table="lineitem", where=where)) == expected
    assert part.stat().st_mtime_ns == written
    assert f"forward/src-lineitem/{part.name}" in als.load_run(run.id).record["added"]  # its digest
    assert verify(als.store.catalog, [run.id])[0].problems == []
    part.write_bytes(part.read_bytes()[:-8] + b"tampered")
    with pytest.raises(IntegrityError, match=r"forward/src-lineitem/part-00000.zstd.parquet was changed"):
        als.load_run(run.id).forward(table="lineitem", where=where)
    (problem,) = verify(als.store.catalog, [run.id])[0].problems
    assert "forward/src-lineitem/part-00000.zstd.parquet" in problem


def test_pruning_makes_smaller_indexes(runs: Runs) -> None:
    full = runs["q3"].index_bytes
    assert 0 < runs["q3_lineitem_backward"].index_bytes < full / 2
    assert 0 < runs["q3_forward_only"].index_bytes < full
    indexes = runs["q3_forward_only"].record["capture"]["indexes"]
    assert all("backward" not in info and "forward" in info for info in indexes.values())


# --- granularity -----------------------------------------------------------------------------


def test_granularity_backward_is_the_projection_of_row_lineage(runs: Runs) -> None:
    rows, coarse = runs["q3"], runs["q3_per_supplier"]
    assert bag(coarse) == bag(rows)
    for target in ({"sample": 3, "seed": 11}, {"where": "revenue > 100000"}, {}):
        lin, fine = coarse.lineage(**target), rows.lineage(**target)
        assert lin.keys["lineitem"] == ("l_suppkey",)
        suppliers = sorted(r["l_suppkey"] for r in lin.source_rows("lineitem"))
        assert suppliers == sorted({r["l_suppkey"] for r in fine.source_rows("lineitem")}), target
        assert all(list(r) == ["l_suppkey"] for r in lin.source_rows("lineitem"))
        assert lin.source_ids("lineitem") == {(r["l_suppkey"],) for r in fine.source_rows("lineitem")}
        for table in ("customer", "orders"):  # the other tables still row by row
            assert lin.source_rows(table) == fine.source_rows(table), (target, table)
        assert "lineitem per l_suppkey" in (lin.scope or "")


def test_granularity_forward_is_the_union_over_the_group(runs: Runs) -> None:
    rows, coarse = runs["q3"], runs["q3_per_supplier"]
    seen = sorted(s for (s,) in coarse.lineage().source_ids("lineitem"))
    unseen = sorted({s for s in LINEITEM.l_suppkey if s is not None} - set(seen))
    assert len(seen) >= 2
    for i, supplier in enumerate(seen[:2] + unseen[:1]):
        lines = [
            (o, n)
            for o, n, s in zip(LINEITEM.l_orderkey, LINEITEM.l_linenumber, LINEITEM.l_suppkey)
            if s == supplier
        ]
        got = answer(coarse, coarse.forward(table="lineitem", ids=[supplier]))
        assert got == answer(rows, rows.forward(table="lineitem", ids=lines)), supplier
        assert got == answer(rows, rows.forward(table="lineitem", where=f"l_suppkey = {supplier}")), supplier
        assert got == answer(coarse, coarse.forward(table="lineitem", where=f"l_suppkey = {supplier}"))
        if i == 0:  # the union of the row-level answers, one line at a time
            union: Counter = Counter()
            for line in lines:
                union |= answer(rows, rows.forward(table="lineitem", ids=[line]))
            assert got == union, supplier
        assert bool(got) == (supplier in seen), supplier


def test_granularity_with_null_values(runs: Runs) -> None:
    """A NULL attribute value is an id like any other, backward and forward."""
    run = runs["orders_per_customer"]
    out = bag(run)
    lin = run.lineage()
    projected = {(r["o_custkey"],) for r in run.lineage(backend="lazy").source_rows("orders")}
    assert lin.source_ids("orders") == projected and (None,) in projected
    per_row = {o: run.lineage(rows=[o]).source_ids("orders") for o in out}
    customer = min(c for (c,) in projected if c is not None)
    for cust, where in ((None, "o_custkey IS NULL"), (customer, f"o_custkey = {customer}")):
        expected = Counter({o: n for o, n in out.items() if (cust,) in per_row[o]})
        assert expected, cust
        assert answer(run, run.forward(table="orders", ids=[cust])) == expected, cust
        assert answer(run, run.forward(table="orders", ids=[(cust,)])) == expected, cust
        assert answer(run, run.forward(table="orders", where=where)) == expected, where


# --- pairs written once ----------------------------------------------------------------------


def test_a_key_widened_by_a_cast_is_joined_on_as_itself() -> None:
    """Spark joins an int key to a bigint column through ``CAST(k AS BIGINT)`` (the bench's
    CSV customers and Parquet orders): equal casts, equal keys, so the pairs stay distinct as
    captured; a narrowing cast or one from a string may make two keys equal and does not."""
    types = {"k#1": "int", "s#2": "string", "b#3": "bigint"}
    assert equated_columns(Expr("(`o#9` = CAST(`k#1` AS BIGINT))"), types) == ("o#9", "k#1")
    assert equated_columns(Expr("(`o#9` = `b#3`)"), types) == ("o#9", "b#3")
    for narrowed in ("CAST(`b#3` AS INT)", "CAST(`s#2` AS BIGINT)", "CAST(`k#1` AS STRING)", "`k#1` + 1"):
        assert equated_columns(Expr(f"(`o#9` = {narrowed})"), types) == (None, None), narrowed


def test_scan_indexes_hold_each_pair_once(runs: Runs) -> None:
    """The capture of α over a scan derives its lineage from the snapshot where DuckDB
    evaluates the scan as Spark does (else, for a lowered flag, a second pass writes a line
    item's attributes as flat columns), and a segment that captures each row of its one
    input once, at its key, writes its pairs as they are, with no DISTINCT (TPC-H Q1 at SF 1:
    6 M pairs). The pairs must still be
    distinct wherever they are not so by construction: at a coarser granularity, and where
    γ repeats a row."""

    def pairs(name: str, table: str = "lineitem") -> list[tuple]:
        folder = Path(local_path(runs[name].dir) or "") / "eager" / "backward" / f"src-{table}"
        rows = pq.read_table(folder).to_pylist()
        return [tuple(r.values()) for r in rows]

    suppliers = {(f, s) for f, s in zip(LINEITEM.l_returnflag, LINEITEM.l_suppkey)}
    for name in ("by_flag", "by_flag_per_supplier"):  # derived in process from the snapshot
        assert runs[name].record["capture"]["segments"]["0"].get("derived") is True, name
    lower = runs["by_lower_flag"]  # by the Spark pass: the same lineage
    assert lower.record["capture"]["segments"]["0"]["lineage"] == "lineage-0"
    returned, traced = (lower.lineage(rows=[{"flag": "r"}], backend=b) for b in ("eager", "lazy"))
    assert returned.source_ids("lineitem") == RETURNED
    assert returned.source_rows("lineitem") == traced.source_rows("lineitem")
    for name, expected in (
        ("by_flag", len(LINEITEM)),
        ("by_flag_per_supplier", len(suppliers)),
        ("each_order_twice", len(LINEITEM)),
    ):
        found = pairs(name)
        assert len(found) == len(set(found)) == expected, name
    # over a join, the table whose every partner is joined on its key is written as captured
    for name, as_captured in (
        ("rollup_of_join", {"lineitem", "orders"}),  # π over ε-α: the child's composed pairs
        ("customers_by_orders", {"customer", "orders"}),  # α over α over ⟕: the same, composed twice
        ("customers_by_orders_tagged", {"customer", "orders"}),
        ("q3", {"lineitem"}),
        ("q3_per_supplier", set()),  # captured coarser than its key
        ("orders_per_customer", {"lineitem"}),
        ("shelves", set()),  # joined on kind, no key
    ):
        run = runs[name]
        assert distinct_as_captured(run.root, run.record["capture"]["plan"]) == as_captured, name
    orders = set(ORDERS.o_orderkey)
    joined_lines = sum(1 for k in LINEITEM.l_orderkey if k in orders)
    for name, table, expected in (
        ("rollup_of_join", "lineitem", 3 * joined_lines),
        ("rollup_of_join", "orders", None),
        ("customers_by_orders", "customer", len(CUSTOMER)),
        ("customers_by_orders", "orders", None),
        ("customers_by_orders_tagged", "customer", len(CUSTOMER)),
        ("customers_by_orders_tagged", "orders", None),
    ):
        found = pairs(name, table)
        assert len(found) == len(set(found)), (name, table)
        assert expected is None or len(found) == expected, (name, table)
    by_flag, coarse = runs["by_flag"], runs["by_flag_per_supplier"]
    target = [r.asDict() for r in by_flag.output.collect() if r["l_returnflag"] == "R"]
    returned = by_flag.lineage(rows=target)
    assert returned.source_ids("lineitem") == RETURNED
    traced = by_flag.lineage(rows=target, backend="lazy")
    assert returned.source_rows("lineitem") == traced.source_rows("lineitem")
    per_supplier = coarse.lineage(rows=target).source_ids("lineitem")
    assert per_supplier == {(s,) for f, s in suppliers if f == "R"}


def test_a_one_row_subquerys_lineage_is_written_once(runs: Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row joined with a one-row segment (an uncorrelated scalar subquery) shares all
    its lineage: the capture writes it once, not once per output row (TPC-DS q14a: 100 rows ×
    130 k line items), and answers give it as contributing rows, as the lazy backend does."""
    run = runs["above_returned_average"]
    out = bag(run)
    assert 1 < len(out) < len(ORDERS)
    (scalar,) = [s for s in run.root.walk() if s.one_row]
    meta = run.record["capture"]
    assert "src-lineitem" not in meta["indexes"]  # no pair (order, line) at all
    folder = Path(local_path(run.dir) or "") / meta["controls"][str(scalar.id)]["src-lineitem"]["dir"]
    assert sorted(tuple(r.values()) for r in pq.read_table(folder).to_pylist()) == sorted(RETURNED)
    (k,) = min(out)
    lin = run.lineage(rows=[(k,)])
    assert lin.source_ids("orders") == {(k,)} and lin.source_ids("lineitem") == RETURNED
    assert {(r["l_orderkey"], r["l_linenumber"]) for r in lin.contributing_rows("lineitem")} == RETURNED
    assert lin.control_rows("lineitem") == []
    assert {tuple(p) for found in lin.paths("lineitem") for p in found["paths"]} == {lin.routes[scalar.id]}
    assert Lineage.of(lin) == Lineage.of(run.lineage(rows=[(k,)], backend="lazy"))
    for module in ("tracing.eager", "tracing.session"):  # one merged answer: the same split
        monkeypatch.setattr(f"{module}.PER_ROW_MAX", 1)
    merged = run.lineage()
    assert {(r["l_orderkey"], r["l_linenumber"]) for r in merged.contributing_rows("lineitem")} == RETURNED
    assert merged.control_rows("lineitem") == []
    forward = run.forward(table="lineitem", ids=[min(RETURNED)])
    assert answer(run, forward) == out and {d["dependence"] for d in forward.rows()} == {"contributing"}


@pytest.mark.parametrize(
    ("derived", "tagged", "segments", "unstored"),
    [
        ("q3", "q3_tagged", 1, 0),
        ("gadgets_derived", "gadgets", 1, 0),
        ("shelves_semi_derived", "shelves_semi", 1, 0),
        ("difference_below_agg", "difference_below_agg_tagged", 1, 3),  # α ⋈ over −, over π and π σ
        ("customers_by_orders", "customers_by_orders_tagged", 1, 2),  # α over α over ⟕: both again
        ("windows", "windows_tagged", 2, 0),  # tagged: the lower ω's pairs made from its output
    ],
)
def test_a_segments_lineage_is_derived_as_its_tags_give_it(
    runs: Runs, derived: str, tagged: str, segments: int, unstored: int
) -> None:
    """α, ⋉ or ω over σ π ⋈ of source tables and child segments, and a difference: the task
    carries no tags, and the index builder derives each kept row's inputs from the source
    snapshots and the children's stored rows in DuckDB; a child that calls no model (σ π ⋈,
    an outer join, a difference, an aggregation whose lineage is derived), under a parent
    derived or evaluated again, is not stored at all, but evaluated again there. Every row's answer
    (paths, source rows, control lineage) and every table's forward answers are those of the
    tags carried through the task (or written by a second pass), a source key holding a NULL
    included (the gadgets), an outer join's padded rows and their check too."""
    found, expected = runs[derived], runs[tagged]
    metas = found.record["capture"]["segments"]
    derived_ones = [s for s in metas.values() if s.get("derived")]
    assert len(derived_ones) == segments
    for segment in derived_ones:
        assert segment["lineage"] is None and not any(info["array"] for info in segment["tags"].values())
    again = {k for k, s in metas.items() if s.get("recomputed")}
    assert len(again) == unstored and not again & set(found.record["stored"])
    assert len(found.record["stored"]) == len(expected.record["stored"]) - unstored
    assert not any("derived" in s for s in expected.record["capture"]["segments"].values())
    assert Lineage.of(found.lineage()) == Lineage.of(expected.lineage())
    whole = found.lineage()
    for table in found.record["capture"]["plan"]:
        ids = sorted((i for i in whole.source_ids(table) if None not in i), key=repr)[:3]
        forward = [answer(run, run.forward(table=table, ids=ids)) for run in (found, expected)]
        assert ids and forward[0] == forward[1] and forward[0], table


def test_a_key_without_nulls_tags_rows_by_its_value(als: LineageSession, runs: Runs) -> None:
    """A one-column key with no NULL (recorded when the table was registered) tags its rows
    by the value itself; a key that holds a NULL keeps a struct, so that `collect_list`, which
    drops NULLs, keeps the NULL-key row in its group's lineage."""
    store = als.store
    assert store.key_without_nulls(store.current_source("customer").snapshot)
    assert not store.key_without_nulls(store.current_source("gadget").snapshot)
    run = runs["gadgets"]
    tags = run.record["capture"]["segments"]["0"]["tags"]
    assert sorted(info.get("attr", "") for info in tags.values()) == ["", "c_custkey"]
    lin = run.lineage(rows=[("a", 2)])
    assert lin.source_ids("gadget") == {(None,), (1,)}
    assert lin.source_ids("customer") == {(1,), (2,)}
    traced = run.lineage(rows=[("a", 2)], backend="lazy")
    for table in ("gadget", "customer"):
        assert lin.source_rows(table) == traced.source_rows(table), table
    assert answer(run, run.forward(table="customer", ids=[2])) == Counter({("a", 2): 1, ("b", 1): 1})


def test_a_key_of_integer_columns_tags_rows_by_one_packed_bigint(als: LineageSession, runs: Runs) -> None:
    """A key of several integer columns with no NULL is tagged by one bigint (each column's
    value less its min, in bits of its own: the ranges registration observed), and unpacked
    into the columns, of their own types, when the indexes are built."""
    assert packing(["a", "b"], {"a": (0, 1), "b": (-5, 2**62)}, {"a": "int", "b": "bigint"}) is None
    ranges = als.store.key_ranges(als.store.current_source("shelf").snapshot)
    assert ranges == {"S_BIN": (-3, 2), "s_slot": (-(2**40), 7)}
    expected = {(b, s) for b, s, kind in SHELVES if kind == "a"}
    for name in ("shelves", "shelves_semi"):
        run = runs[name]
        tags = run.record["capture"]["segments"]["0"]["tags"]
        assert [info["packed"] for info in tags.values() if "packed" in info] == [
            [["s_bin", 41, 3, -3, "smallint"], ["s_slot", 0, 41, -(2**40), "bigint"]]
        ], name
        lin = run.lineage(rows=[{"kind": "a"}])
        assert lin.source_ids("shelf") == expected, name
        traced = run.lineage(rows=[{"kind": "a"}], backend="lazy")
        assert lin.source_rows("shelf") == traced.source_rows("shelf"), name
        row_a = Counter(t for t in bag(run).elements() if t[0] == "a")
        assert answer(run, run.forward(table="shelf", ids=[(-3, -(2**40))])) == row_a, name
    assert als.store.key_ranges(als.store.current_source("customer").snapshot) is None  # one column


@contextmanager
def record_changed(als: LineageSession, table: str, **changes: Any) -> Iterator[Path]:
    """``table``'s source record with ``changes``, as a hand edit leaves it (Hadoop's checksum
    still beside it); restored afterwards."""
    meta = Path(local_path(als.store.current_source(table).snapshot) or "") / SOURCE_META
    crc = meta.with_name(f".{meta.name}.crc")
    saved, saved_crc = meta.read_text(), crc.read_bytes()
    try:
        meta.write_text(json.dumps(json.loads(saved) | changes))
        yield crc
    finally:
        meta.write_text(saved)
        crc.write_bytes(saved_crc)


def test_a_key_unlike_its_record_fails_in_one_line(als: LineageSession) -> None:
    """A source record changed by hand: narrowed key ranges would pack two keys into one tag,
    and a key said to hold no NULL would have ``collect_list`` drop its NULL-key row from its
    group's lineage. The capture fails in one line instead, naming the table. With Hadoop's
    checksum left beside the record, reading it fails first, in one line too."""
    record = als.store.read_record(f"{als.store.current_source('shelf').snapshot}/{SOURCE_META}")
    ranges = record["key_ranges"]
    with record_changed(als, "shelf", key_ranges=ranges | {"s_slot": [0, 7]}) as crc:
        with pytest.raises(StoreError, match="does not match the checksum") as e:
            LineageSession(als.spark, store=als.store.uri).table("shelf")
        assert "\n" not in str(e.value)
        crc.unlink()
        fresh = LineageSession(als.spark, store=als.store.uri)  # reads the record anew
        with tags_in_the_task("shelves"), pytest.raises(StoreError, match="'shelf': a key value lies") as e:
            fresh.run(shelves_per_kind(fresh), backend="eager")
        assert "\n" not in str(e.value)
    with record_changed(als, "gadget", key_nulls=False) as crc:
        crc.unlink()
        fresh = LineageSession(als.spark, store=als.store.uri)
        with tags_in_the_task("gadgets"), pytest.raises(StoreError, match="'gadget': a key value is NU") as e:
            fresh.run(gadgets_per_kind(fresh), backend="eager")
        assert "\n" not in str(e.value) and "register the table again" in str(e.value)


# --- differences -----------------------------------------------------------------------------


def test_difference_backward_has_control_lineage(runs: Runs) -> None:
    """T1 − T2: an output row's lineage is the equal T1 row and ALL of T2's lineage."""
    run = runs["difference"]
    out = bag(run)
    with_returns = {o for o, _ in RETURNED}
    assert set(out) == {(k,) for k in ORDERS.o_orderkey if k not in with_returns}
    assert all(n == 1 for n in out.values())
    (k,) = min(out)
    lin = run.lineage(rows=[(k,)])
    assert lin.source_ids("orders") == {(k,)}
    assert lin.source_ids("lineitem") == RETURNED
    assert Lineage.of(lin) == Lineage.of(run.lineage(rows=[(k,)], backend="lazy"))
    everything = run.lineage()
    assert everything.source_ids("orders") == set(out) and everything.source_ids("lineitem") == RETURNED
    assert Lineage.of(everything) == Lineage.of(run.lineage(backend="lazy"))


def test_an_answer_about_many_rows_tells_contributing_from_control_rows(
    runs: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past PER_ROW_MAX chosen rows an answer is one merged answer; it still tells the rows
    only checked for absence apart, as the lazy answer does (the eager one said "ask about at
    most 1,000 output rows")."""
    for module in ("tracing.eager", "tracing.session"):
        monkeypatch.setattr(f"{module}.PER_ROW_MAX", 1)
    run = runs["difference"]
    for backend in ("eager", "lazy"):
        lin = run.lineage(backend=backend)
        assert lin.by_row is None and len(bag(run)) > 1, backend
        assert {(r["o_orderkey"],) for r in lin.contributing_rows("orders")} == set(bag(run)), backend
        assert lin.contributing_rows("lineitem") == [] and lin.control_rows("orders") == [], backend
        assert {(r["l_orderkey"], r["l_linenumber"]) for r in lin.control_rows("lineitem")} == RETURNED


def test_control_rows_are_counted_first_and_read_when_asked(runs: Runs) -> None:
    """An eager answer reads the source rows whose values made the chosen rows; those only
    checked for absence are counted from the index and read when asked for (TPC-H Q21 at
    SF 1: one row's 342 k line items, 1.6 s of a 2.5 s question); a lazy one answered in
    process traces them by their key alone and reads them the same way. Counts, the printed
    answer, each row's own answer and the rows once read equal the Spark engine's, which
    reads every row whole."""
    run = runs["difference_same_table"]
    chosen = sorted(bag(run))[:2]
    spark = run.lineage(rows=chosen, backend="lazy", engine="spark")
    used, checked = spark.part_counts("lineitem")
    assert checked >= len(RETURNED) and not spark.deferred
    for lin in (run.lineage(rows=chosen), run.lineage(rows=chosen, backend="lazy")):
        assert lin.part_counts("lineitem") == (used, checked)
        assert f"+ {checked} row(s) only checked" in str(lin)
        assert [one.part_counts("lineitem") for one in lin.rows] == [
            one.part_counts("lineitem") for one in spark.rows
        ]
        assert lin.source["lineitem"].num_rows == used  # none of the checked rows read yet
        assert lin.control_rows("lineitem") == spark.control_rows("lineitem")
        assert lin.source["lineitem"].num_rows == used + checked
        assert Lineage.of(lin) == Lineage.of(spark)
        assert [Lineage.of(one) for one in lin.rows] == [Lineage.of(one) for one in spark.rows]


def test_difference_forward_of_minuend_rows(runs: Runs) -> None:
    run = runs["difference"]
    out = bag(run)
    (k,) = min(out)
    assert answer(run, run.forward(table="orders", ids=[k])) == Counter({(k,): 1})
    removed = min(o for o, _ in RETURNED)  # in T1, but equal to a T2 row: in no lineage
    assert answer(run, run.forward(table="orders", ids=[removed])) == Counter()
    assert answer(run, run.forward(table="orders", where=f"o_orderkey <= {k}")) == Counter({(k,): 1})


def test_difference_forward_of_a_subtrahend_row_is_every_output_row(runs: Runs) -> None:
    """lineitem is read only by T2 (no forward index of its own): answered through control
    lineage. Regression: raised NotCapturedError 'has no src-lineitem lineage'."""
    run = runs["difference"]
    out = bag(run)
    returned = sorted(RETURNED)
    assert answer(run, run.forward(table="lineitem", ids=returned[:1])) == out
    assert answer(run, run.forward(table="lineitem", ids=returned[-3:])) == out
    other = min((o, n) for o, n in zip(LINEITEM.l_orderkey, LINEITEM.l_linenumber) if (o, n) not in RETURNED)
    assert answer(run, run.forward(table="lineitem", ids=[other])) == Counter()  # not in T2
    assert any(f == "R" and q > 40 for f, q in zip(LINEITEM.l_returnflag, LINEITEM.l_quantity))
    assert answer(run, run.forward(table="lineitem", where="l_returnflag = 'R' AND l_quantity > 40")) == out


def test_difference_forward_when_the_subtrahend_table_feeds_both_sides(runs: Runs) -> None:
    """T2's table also feeds T1 (so it has a forward index): a T1-only row reaches only the
    output row equal to it; the backward answer holds all of T2."""
    run = runs["difference_same_table"]
    out = bag(run)
    assert len(out) >= 2
    for (o,) in sorted(out)[:2]:
        line = min(
            (a, n)
            for a, n, s in zip(LINEITEM.l_orderkey, LINEITEM.l_linenumber, LINEITEM.l_shipmode)
            if a == o and s == "AIR" and (a, n) not in RETURNED
        )
        assert answer(run, run.forward(table="lineitem", ids=[line])) == Counter({(o,): 1}), line
    lin = run.lineage(rows=[min(out)])
    assert lin.source_ids("lineitem") >= RETURNED
    assert Lineage.of(lin) == Lineage.of(run.lineage(rows=[min(out)], backend="lazy"))


def test_difference_forward_of_a_subtrahend_row_when_its_table_feeds_both_sides(runs: Runs) -> None:
    """Regression: the scan of eager/ctl filtered on a column it had not selected (DuckDB
    BinderException 'Referenced column "d" not found')."""
    run = runs["difference_same_table"]
    returned_only = min(
        (o, n)
        for o, n, f, m in zip(
            LINEITEM.l_orderkey, LINEITEM.l_linenumber, LINEITEM.l_returnflag, LINEITEM.l_shipmode
        )
        if f == "R" and m != "AIR"
    )
    assert answer(run, run.forward(table="lineitem", ids=[returned_only])) == bag(run)


def test_difference_below_an_aggregation(runs: Runs) -> None:
    """The control lineage reaches the output through the segments above the difference."""
    run = runs["difference_below_agg"]
    out = bag(run)
    assert len(out) >= 2
    lazy = run.lineage(backend="lazy")
    assert Lineage.of(run.lineage()) == Lineage.of(lazy)
    first = min(out)
    lin = run.lineage(rows=[first])
    assert lin.source_ids("lineitem") == RETURNED
    assert Lineage.of(lin) == Lineage.of(run.lineage(rows=[first], backend="lazy"))
    priority = first[0]
    kept = {k for k, p in zip(ORDERS.o_orderkey, ORDERS.o_orderpriority) if p == priority}
    assert lin.source_ids("orders") == {(k,) for k in kept - {o for o, _ in RETURNED}}
    (k,) = min(lin.source_ids("orders"))
    assert answer(run, run.forward(table="orders", ids=[k])) == Counter({first: 1})


def test_difference_below_an_aggregation_forward_of_a_subtrahend_row(runs: Runs) -> None:
    run = runs["difference_below_agg"]
    assert answer(run, run.forward(table="lineitem", ids=[min(RETURNED)])) == bag(run)


def test_empty_subtrahend_adds_no_lineage(runs: Runs) -> None:
    run = runs["empty_subtrahend"]
    out = bag(run)
    assert set(out) == {(k,) for k in ORDERS.o_orderkey}
    lin = run.lineage(rows=[min(out)])
    assert lin.tables == ["orders"] and lin.source_ids("orders") == {min(out)}
    assert Lineage.of(lin) == Lineage.of(run.lineage(rows=[min(out)], backend="lazy"))


def test_empty_subtrahend_forward_of_its_table_is_empty(runs: Runs) -> None:
    run = runs["empty_subtrahend"]
    assert answer(run, run.forward(table="lineitem", ids=[min(RETURNED)])) == Counter()


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capture", "message"),
    [
        (Capture(tables=("part",)), r"'part'.*does not read \(customer, lineitem, orders\)"),
        (Capture(granularity={"supplier": ("s_suppkey",)}), r"'supplier'.*customer, lineitem, orders"),
        (Capture(granularity={"lineitem": ("l_nope",)}), r"granularity of 'lineitem'.*l_nope.*l_suppkey"),
        (Capture(granularity={"lineitem": ()}), r"granularity of 'lineitem'"),
        (Capture(directions=("sideways",)), r"directions.*sideways"),
        (Capture(directions=()), r"directions"),
    ],
)
def test_bad_capture_fails_before_running(als: LineageSession, capture: Capture, message: str) -> None:
    before = set(als.runs())
    with pytest.raises(CaptureError, match=message):
        als.run(q3_like(als), backend="eager", capture=capture)
    assert set(als.runs()) == before, "nothing may be run or stored"


def test_bad_backend_and_strategy(als: LineageSession) -> None:
    task = q3_like(als)
    with pytest.raises(ValueError, match="strategy"):
        als.run(task, backend="eager", strategy="rerun")
    with pytest.raises(ValueError, match="backend"):
        als.run(task, backend="smoke")
    with pytest.raises(ValueError, match="capture"):
        als.run(task, strategy="fm", capture=Capture())


def test_lazy_run_has_no_eager_answers(als: LineageSession) -> None:
    run = als.run(q3_like(als), strategy="rerun")
    assert run.backend == "lazy" and run.index_bytes == 0
    with pytest.raises(NotCapturedError, match="backend='eager'"):
        run.forward(table="orders", ids=[1])
    with pytest.raises(NotCapturedError, match="kept no eager lineage indexes"):
        run.lineage(sample=1, backend="eager")
    with pytest.raises(ValueError, match="backend"):
        run.lineage(sample=1, backend="smoke")


def test_bad_forward_questions(runs: Runs) -> None:
    run = runs["loan"]
    with pytest.raises(ValueError, match="ids= or where="):
        run.forward(table="loan", ids=["L02"], where="LoanAmount > 1")
    with pytest.raises(ValueError, match="ids= or where="):
        run.forward(table="loan")
    with pytest.raises(ValueError, match=r"table= .* or udf="):
        run.forward(table="loan", udf="credit_rules", where="TRUE")
    with pytest.raises(ValueError, match=r"table= .* or udf="):
        run.forward(ids=["L02"])
    with pytest.raises(ValueError, match="where="):
        run.forward(udf="credit_rules", ids=["L02"])
    with pytest.raises(LineageError, match=r"no UDF 'nope' \(it calls \['credit_rules'\]\)"):
        run.forward(udf="nope", where="TRUE")
    with pytest.raises(LineageError, match=r"does not read table 'orders'.*\['client', 'debt', 'loan'\]"):
        run.forward(table="orders", ids=[1])
    for where in ("LoanNope > 1", "LoanAmount >", "no_such_function(LoanAmount)"):
        with pytest.raises(LineageError) as err:
            run.forward(table="loan", where=where)
        assert_one_line(err.value, where)
    with pytest.raises(LineageError) as err:
        run.forward(udf="credit_rules", where="Verdict = 'Reject'")
    assert_one_line(err.value, "Verdict")


def test_bad_ids(runs: Runs) -> None:
    run = runs["q3"]
    with pytest.raises(LineageError, match=r"ids of lineitem are tuples of \['l_orderkey', 'l_linenumber'\]"):
        run.forward(table="lineitem", ids=[5])
    with pytest.raises(LineageError, match="should have values for"):
        run.forward(table="lineitem", ids=[(1, 2, 3)])
    with pytest.raises(LineageError, match="do not fit"):
        run.forward(table="orders", ids=["not a number"])
    assert len(run.forward(table="orders", ids=[10_000])) == 0  # a key that is not in the table
    assert len(runs["q3_per_supplier"].forward(table="lineitem", ids=[(1,)])) > 0
    with pytest.raises(LineageError, match="should have values for"):
        runs["q3_per_supplier"].forward(table="lineitem", ids=[(1, 1)])  # a row id, not a supplier


def test_bad_targets(runs: Runs) -> None:
    run = runs["loan"]
    with pytest.raises(TargetNotFoundError, match="not in the output"):
        run.lineage(rows=[("Reject", 2)])
    with pytest.raises(TargetNotFoundError, match="not in the output"):
        run.lineage(rows=[("Accept", 2), ("Maybe", 1)])
    with pytest.raises(TargetNotFoundError):
        run.lineage(where="Judge = 'Maybe'")
    with pytest.raises(LineageError) as err:
        run.lineage(where="Verdict = 'Reject'")
    assert_one_line(err.value, "Verdict")
    with pytest.raises(LineageError, match="unknown column"):
        run.lineage(rows=[{"Verdict": "Reject"}])
    with pytest.raises(LineageError, match="do not fit"):
        run.lineage(rows=[("Reject", "one")])
    with pytest.raises(ValueError, match="at most one"):
        run.lineage(rows=[("Reject", 1)], sample=1)
    with pytest.raises(ValueError, match="empty"):
        run.lineage(rows=[])


def assert_one_line(exc: BaseException, mentions: str) -> None:
    text = str(exc)
    assert "\n" not in text and "org.apache" not in text and "JVM" not in text, text
    assert mentions in text, text


# --- a run read back ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["loan", "q3_per_supplier", "difference"])
def test_loaded_run_answers_the_same(als: LineageSession, runs: Runs, name: str) -> None:
    run = runs[name]
    loaded = als.load_run(run.id)
    assert loaded.backend == "eager"
    assert {**loaded.record, "added": None} == {**run.record, "added": None}  # questions add files
    for target in ({"sample": 2, "seed": 3}, {}):
        assert Lineage.of(loaded.lineage(**target)) == Lineage.of(run.lineage(**target)), target
    table = {"loan": "loan", "q3_per_supplier": "lineitem", "difference": "orders"}[name]
    where = {
        "loan": "LoanAmount < 10000",
        "q3_per_supplier": "l_suppkey < 4",
        "difference": "o_orderkey < 20",
    }
    again, first = loaded.forward(table=table, where=where[name]), run.forward(table=table, where=where[name])
    assert answer(loaded, again) == answer(run, first) and len(first) > 0
    assert loaded.index_bytes == run.index_bytes > 0


# --- in-process answers ----------------------------------------------------------------------


def test_small_eager_answers_run_no_spark_job(runs: Runs) -> None:
    run = runs["loan"]
    run.lineage(rows=[("Reject", 1)])  # warm: the first answer may read the run's files
    with spark_jobs() as eager_backward:
        lin = run.lineage(rows=[("Reject", 1)])
        assert lin.source_ids("loan") == {("L02",)}
        assert len(lin.reasoning_rows()) == 1
    with pytest.MonkeyPatch.context() as patch, spark_jobs() as merged:
        patch.setattr("tracing.eager.PER_ROW_MAX", 0)  # an answer not kept per row, as one of many
        assert run.lineage(rows=[("Reject", 1)]).source_rows("loan") == lin.source_rows("loan")
    with spark_jobs() as eager_forward:
        fwd = run.forward(table="loan", ids=["L02", "L03"])
        assert len(fwd) == 2
    with spark_jobs() as in_process:  # lazy tracing queries answered in process: no job either
        run.lineage(rows=[("Reject", 1)], backend="lazy").source_rows("loan")
    with spark_jobs() as eager_where:  # a predicate DuckDB judges as Spark does: chosen in process
        by_where = run.lineage(where="Judge = 'Reject' AND count < 2")
    with spark_jobs() as spark_where:  # one it does not know (upper): Spark chooses the rows
        by_spark = run.lineage(where="upper(Judge) = 'REJECT'")
    with spark_jobs() as on_spark:  # the control: tracing queries forced onto Spark are jobs
        run.lineage(rows=[("Reject", 1)], backend="lazy", engine="spark").source_rows("loan")
    assert eager_backward == [0] and eager_forward == [0] and in_process == [0] and eager_where == [0]
    assert merged == [0]  # read in process, however large (a local store: before, past 2 M keys, Spark)
    assert on_spark[0] > 0 and spark_where[0] > 0
    for found in (by_where, by_spark):
        assert found.source_rows("loan") == lin.source_rows("loan")
        assert found.reasoning_rows() == lin.reasoning_rows()


def test_duckdb_out_of_its_memory_is_one_line_and_lazy_questions_go_to_spark(
    als: LineageSession, runs: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB bounded below what a step needs: an eager run's indexes are composed by Spark
    (its derived lineage too), the same answer; a lazy question is answered by Spark, the
    same rows; forced in process, or an eager question, one line."""
    run = runs["loan"]
    expected = run.lineage(rows=[("Reject", 1)], backend="lazy").source_ids("loan")
    assert run.record["capture"]["composed_by"] == "duckdb"
    monkeypatch.setenv("AL_DUCKDB_MEMORY", "1MB")
    one_line = r"^answering in process needed more memory than DuckDB may use here \(1MB; [^\n]*$"
    said: list[str] = []
    monkeypatch.setattr(als, "progress", said.append)
    again = als.run(loan_task(als), backend="eager")
    assert again.record["capture"]["composed_by"] == "spark"
    assert "DuckDB needed more than its 1MB (AL_DUCKDB_MEMORY); composing them with Spark" in said[-1]
    with monkeypatch.context() as bounded:
        bounded.delenv("AL_DUCKDB_MEMORY")
        asked = [("Reject", 1)]
        assert Lineage.of(again.lineage(rows=asked)) == Lineage.of(run.lineage(rows=asked))
    als.store.delete(again.dir)
    lazy = run.lineage(rows=[("Reject", 1)], backend="lazy")
    assert lazy.engine == "spark" and lazy.source_ids("loan") == expected
    with pytest.raises(LineageError, match=one_line):
        run.lineage(rows=[("Reject", 1)], backend="lazy", engine="in-process")
    with pytest.raises(LineageError, match=one_line):  # a fresh reader of its indexes
        als.load_run(run.id).lineage(rows=[("Reject", 1)])


def test_dates_and_decimals_survive_the_indexes(runs: Runs) -> None:
    """Output rows read back in-process compare equal to Spark's (dates, decimals, doubles)."""
    run = runs["q3"]
    row = min(bag(run))
    assert isinstance(row[1], date)
    fwd = run.forward(table="orders", ids=[row[0]])
    assert answer(run, fwd) == Counter({row: 1})
    lin = run.lineage(rows=[row])
    assert lin.source_ids("orders") == {(row[0],)}

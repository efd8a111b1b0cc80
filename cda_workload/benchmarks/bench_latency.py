"""Lineage latency on every backend, side by side with the physical limit.

    python -m cda_workload.benchmarks.bench_latency --cases loan,tpch:Q3,tpch:Q10 --tpch-sf 1 --repeat 5

For each case the task runs once per lazy strategy (rerun, fm, full) and once eagerly (indexes
kept as Parquet pairs and ProvRC); then, for 1 and for 100 output rows (all rows when the output
is smaller; a fresh seeded draw per repetition), the same rows are asked of every way, the answer
collected to Python (``to_dict()``) inside the timed block:

- ``rerun``, ``fm``, ``full``: tracing queries, engine chosen per question (in process here);
- ``fm-lazy``: an fm run with ``reasons="lazy"`` (reasons computed by the first question that
  reaches a call, then read from the run's cache: each new row's calls pay for theirs);
- ``fm@spark``: the fm run with the tracing queries forced onto Spark (the engine of before);
- ``eager``, ``compressed``: the captured indexes;
- ``duckdb``: hand-written DuckDB semi-joins over the same source snapshots, rows fetched to
  Python: the physical limit (written for the loan example and CDA Q2/Q17/Q21, reading the
  model calls the fm run stored, and for TPC-H Q3/Q10).

``--sizes`` and ``--ways`` choose fewer questions and ways (rerun's run is always made: it gives
the rows asked about); ``--reasons auto`` makes the lazy strategies' and the eager runs as a
user's default does, sparing a model's expensive reasons at task time (then fm is the fm-lazy
way).

Ways alternate inside each repetition, so load bursts hit all of them; each starts after a
full garbage collection in Python and in Spark's driver (untimed), so that none pays for the
objects the one before it left.
A warm-up question per way comes first (its own seeded rows): a process's first question
loads the models and compiles the query shapes, and the next ones are slower than the rest
too. Its time is reported apart ("first question"), not in the medians.
With ``--task-time`` it also times the task itself: the query's rows only collected (normal
mode, nothing written), the paper's Baseline ("executing the analysis query without storing
any intermediate results for Rerun": a rerun run, its output written as every run's is), fm,
and fm with lazy reasons; after a warm-up round that is not counted, in an order that
alternates. Overheads are over the rerun run. Prints tables of medians (latency with each
way's ratio to the DuckDB reference, and the Spark jobs each way's question started) and
writes ``bench_latency.json`` and ``bench_latency.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from cda_workload.benchmarks.bench import Case, baseline, interleaved, machine, prepare, timed
from cda_workload.benchmarks.bench_eager import TPCH_QUERIES
from cda_workload.workloads.cda_queries import QUERIES as CDA_QUERIES
from cda_workload.workloads.loan_example import loan_task, register_loan_tables
from cda_workload.workloads.tpch import generate, register_tpch
from materialization import duck
from materialization.capture import Capture
from materialization.locations import local_path
from materialization.restore import stored_columns
from segmenter.operators import Source
from tracing import LineageSession, Run

SIZES = (1, 100)
LAZY = ("rerun", "fm", "full")
WAYS = (*LAZY, "fm-lazy", "fm@spark", "eager", "compressed", "duckdb")
# --task-time: rows collected, nothing written; the paper's Baseline (a rerun run); reasons at task
# time; reasons at question time
TASKS = ("collect", "rerun", "fm", "fm-lazy")

@dataclass(frozen=True)
class HandWritten:
    """Hand-written DuckDB semi-joins giving the lineage of the target rows (table ``targets``,
    the output's column names): one query per source table, after ``steps`` (intermediate
    tables a person would keep, created in order at each question). ``{table}`` stands for a
    table's snapshot files and ``{segmentN}`` for the rows the fm run stored of segment N, by
    column name (the model calls, so that no model runs)."""

    tables: dict[str, str]
    steps: tuple[tuple[str, str], ...] = ()


_LOAN_ROWS = (
    "SELECT c.ClientID, l.LoanID FROM {client} c JOIN {debt} d ON c.ClientID = d.ClientID "
    "JOIN {loan} l ON c.ClientID = l.ClientID WHERE month(l.ApplicationDate) = 12 "
    "AND (c.Income, d.Debt, l.LoanAmount) IN (SELECT (Income, Debt, LoanAmount) FROM {segment1} k "
    "SEMI JOIN targets t ON k.Judge = t.Judge)"
)
# CDA Q2: an output row pins its part and supplier; min_cost's group for the part is every
# partsupp row of a European supplier (the output row's own among them).
_Q2_GROUP = (
    "SELECT ps.*, s.s_nationkey FROM {partsupp} ps JOIN {supplier} s ON s.s_suppkey = ps.ps_suppkey "
    "JOIN {nation} n ON s.s_nationkey = n.n_nationkey JOIN {region} r ON n.n_regionkey = r.r_regionkey "
    "WHERE r.r_name = 'EUROPE' AND ps.ps_partkey IN (SELECT p_partkey FROM targets)"
)
# CDA Q21: the calls the stored φ segment holds for the targets' suppliers, and (the D rule)
# all of the NOT EXISTS difference's subtrahend once a target reaches it.
_Q21_SUBTRAHEND = (
    "SELECT s.s_suppkey, l1.l_orderkey, l1.l_linenumber, l1.l_suppkey, o.o_orderkey, n.n_nationkey "
    "FROM {supplier} s JOIN {lineitem} l1 ON s.s_suppkey = l1.l_suppkey "
    "JOIN {orders} o ON o.o_orderkey = l1.l_orderkey JOIN {nation} n ON s.s_nationkey = n.n_nationkey "
    "WHERE EXISTS (SELECT 1 FROM {lineitem} l2 WHERE l2.l_orderkey = l1.l_orderkey "
    "AND l2.l_suppkey <> l1.l_suppkey) AND EXISTS (SELECT 1 FROM {lineitem} l3 "
    "WHERE l3.l_orderkey = l1.l_orderkey AND l3.l_suppkey <> l1.l_suppkey "
    "AND l3.l_receiptdate > l3.l_commitdate) AND EXISTS (SELECT 1 FROM kept)"
)
REFERENCES: dict[str, HandWritten] = {
    "loan": HandWritten(
        {
            "client": f"SELECT * FROM {{client}} WHERE ClientID IN (SELECT ClientID FROM ({_LOAN_ROWS}))",
            "debt": f"SELECT * FROM {{debt}} WHERE ClientID IN (SELECT ClientID FROM ({_LOAN_ROWS}))",
            "loan": f"SELECT * FROM {{loan}} WHERE LoanID IN (SELECT LoanID FROM ({_LOAN_ROWS}))",
        }
    ),
    "tpch:Q3": HandWritten(
        {
            "orders": "SELECT o.* FROM {orders} o SEMI JOIN targets t ON o.o_orderkey = t.l_orderkey",
            "customer": "SELECT c.* FROM {customer} c WHERE c.c_custkey IN "
            "(SELECT o_custkey FROM {orders} o SEMI JOIN targets t ON o.o_orderkey = t.l_orderkey)",
            "lineitem": "SELECT l.* FROM {lineitem} l SEMI JOIN targets t ON l.l_orderkey = t.l_orderkey "
            "WHERE l.l_shipdate > DATE '1995-03-15'",
        }
    ),
    "tpch:Q10": HandWritten(
        {
            "customer": "SELECT c.* FROM {customer} c SEMI JOIN targets t ON c.c_custkey = t.c_custkey",
            "nation": "SELECT n.* FROM {nation} n WHERE n.n_nationkey IN "
            "(SELECT c_nationkey FROM {customer} c SEMI JOIN targets t ON c.c_custkey = t.c_custkey)",
            "orders": "SELECT o.* FROM {orders} o SEMI JOIN targets t ON o.o_custkey = t.c_custkey "
            "WHERE o.o_orderdate >= DATE '1993-10-01' AND o.o_orderdate < DATE '1994-01-01' "
            "AND EXISTS (SELECT 1 FROM {lineitem} l WHERE l.l_orderkey = o.o_orderkey "
            "AND l.l_returnflag = 'R')",
            "lineitem": "SELECT l.* FROM {lineitem} l WHERE l.l_returnflag = 'R' AND l.l_orderkey IN "
            "(SELECT o_orderkey FROM {orders} o SEMI JOIN targets t ON o.o_custkey = t.c_custkey "
            "WHERE o.o_orderdate >= DATE '1993-10-01' AND o.o_orderdate < DATE '1994-01-01')",
        }
    ),
    "cda:Q2": HandWritten(
        {
            "part": "SELECT p.* FROM {part} p SEMI JOIN targets t ON p.p_partkey = t.p_partkey",
            "partsupp": "SELECT ps.* FROM {partsupp} ps SEMI JOIN grp g "
            "ON ps.ps_partkey = g.ps_partkey AND ps.ps_suppkey = g.ps_suppkey",
            "supplier": "SELECT s.* FROM {supplier} s WHERE s.s_suppkey IN (SELECT ps_suppkey FROM grp)",
            "nation": "SELECT n.* FROM {nation} n WHERE n.n_nationkey IN (SELECT s_nationkey FROM grp)",
            "region": "SELECT r.* FROM {region} r WHERE r.r_name = 'EUROPE' AND EXISTS (SELECT 1 FROM grp)",
        },
        (("grp", _Q2_GROUP),),
    ),
    "cda:Q17": HandWritten(  # one output row: the lineage of the sum over every row kept
        {
            "lineitem": "SELECT l.* FROM {lineitem} l WHERE l.l_partkey IN (SELECT l_partkey FROM kept)",
            "part": "SELECT p.* FROM {part} p WHERE p.p_partkey IN (SELECT l_partkey FROM kept)",
        },
        (
            (
                "kept",
                "SELECT l_partkey FROM {segment1} WHERE text_sentiment = 'Positive' "
                "AND EXISTS (SELECT 1 FROM targets)",
            ),
        ),
    ),
    "cda:Q21": HandWritten(
        {
            "supplier": "SELECT s.* FROM {supplier} s WHERE s.s_suppkey IN (SELECT s_suppkey FROM traced)",
            "orders": "SELECT o.* FROM {orders} o WHERE o.o_orderkey IN (SELECT o_orderkey FROM traced)",
            "nation": "SELECT n.* FROM {nation} n WHERE n.n_nationkey IN (SELECT n_nationkey FROM traced)",
            "lineitem": "SELECT l.* FROM {lineitem} l WHERE (l.l_orderkey, l.l_linenumber) IN "
            "(SELECT (l_orderkey, l_linenumber) FROM traced) OR EXISTS (SELECT 1 FROM traced r "
            "WHERE r.l_orderkey = l.l_orderkey AND r.l_suppkey <> l.l_suppkey)",
        },
        (
            (
                "kept",
                "SELECT s_suppkey, l_orderkey, l_linenumber, l_suppkey, o_orderkey, n_nationkey "
                "FROM {segment1} k SEMI JOIN targets t ON k.s_name = t.s_name "
                "WHERE k.text_sentiment = 'Positive'",
            ),
            ("traced", f"SELECT * FROM kept UNION {_Q21_SUBTRAHEND}"),
        ),
    ),
}


@dataclass(frozen=True)
class LatencyCase:
    name: str  # loan, tpch:Q3, cda:Q17
    scale: str

    def register(self, als: LineageSession, data: Path, seed: int) -> None:
        workload, _, query = self.name.partition(":")
        if workload == "loan":
            register_loan_tables(als)
        elif workload == "tpch":
            register_tpch(als, generate(float(self.scale), data / f"tpch-sf{self.scale}"))
        else:
            prepare(als, Case("cda", query, self.scale, CDA_QUERIES[query]), data, seed)

    def task(self, als: LineageSession) -> DataFrame:
        workload, _, query = self.name.partition(":")
        if workload == "loan":
            return loan_task(als)
        return als.sql((TPCH_QUERIES if workload == "tpch" else CDA_QUERIES)[query])


def parse_cases(spec: str, tpch_sf: str, cda_sf: str) -> list[LatencyCase]:
    out = []
    for name in (n.strip() for n in spec.split(",") if n.strip()):
        workload, _, query = name.partition(":")
        queries = {"tpch": TPCH_QUERIES, "cda": CDA_QUERIES}.get(workload)
        if name != "loan" and (queries is None or query not in queries):
            raise SystemExit(f"unknown case {name!r}: loan, tpch:<{','.join(TPCH_QUERIES)}>, cda:<Q1..>")
        out.append(LatencyCase(name, tpch_sf if workload == "tpch" else cda_sf if workload == "cda" else "-"))
    return out


class Reference:
    """A case's :class:`HandWritten` semi-joins over its runs' source snapshots."""

    def __init__(self, written: HandWritten, fm: Run) -> None:
        snapshots = {n.table: local_path(n.snapshot) for n in fm.task.root.walk() if isinstance(n, Source)}
        files = {t: f"read_parquet('{p}/*.parquet')" for t, p in snapshots.items()}
        firsts = fm.root.firsts()
        for seg in fm.root.walk():
            stored = fm.record["stored"].get(str(seg.id))
            if stored:
                names = {c.id: c.name for c in seg.top.columns}
                cols = ", ".join(f'"{f}" AS "{names[c]}"' for f, c in stored_columns(stored, seg, firsts))
                files[f"segment{seg.id}"] = (
                    f"(SELECT {cols} FROM read_parquet('{local_path(fm.dir)}/{stored['dir']}/*.parquet'))"
                )
        self.steps = [(name, sql.format(**files)) for name, sql in written.steps]
        self.queries = {t: sql.format(**files) for t, sql in written.tables.items()}
        self.con = duck.connect()

    def ask(self, targets: pa.Table) -> dict[str, list[dict[str, Any]]]:
        self.con.register("targets", targets)
        try:
            for name, sql in self.steps:
                self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}")
            return {t: self.con.sql(sql).to_arrow_table().to_pylist() for t, sql in self.queries.items()}
        finally:
            self.con.unregister("targets")


class SparkJobs:
    """The Spark jobs a block starts, counted by a job group of its own. Spark's status store
    hears of jobs asynchronously, so :meth:`count` waits a moment (outside any timed block)."""

    def __init__(self, spark: SparkSession) -> None:
        self.sc = spark.sparkContext
        self.tracker = self.sc.statusTracker()

    @contextmanager
    def group(self) -> Iterator[str]:
        name = f"bench-latency-{uuid.uuid4().hex}"
        self.sc.setJobGroup(name, "bench_latency question")
        try:
            yield name
        finally:
            self.sc.setLocalProperty("spark.jobGroup.id", None)
            self.sc.setLocalProperty("spark.job.description", None)

    def count(self, name: str) -> int:
        time.sleep(0.3)
        return len(self.tracker.getJobIdsForGroup(name))


def collect_garbage(spark: SparkSession) -> None:
    """A full collection in Python and in the driver's JVM. Without the JVM's, CDA Q21's
    in-process ways ran slower in a benchmark with fm@spark (10 s of Spark jobs a question)
    than in one without it (rerun 1.56 against 1.11 s, fm 1.16 against 0.90 s), and as fast
    as without it once each way started after one (rerun 1.06 s): the JVM was collecting
    fm@spark's garbage beside them on the machine's 2 cores."""
    gc.collect()
    spark.sparkContext._jvm.System.gc()  # type: ignore[union-attr]


def measure(
    als: LineageSession,
    case: LatencyCase,
    repeat: int,
    seed: int,
    log: Callable[[str], None],
    reasons: str = "eager",
    ways: tuple[str, ...] = WAYS,
    sizes: tuple[int, ...] = SIZES,
) -> Iterator[list[dict[str, Any]]]:
    """The latency of each of ``ways``, the records of one question size at a time;
    ``reasons`` is that of the rerun, fm, full and eager runs (each runs: rerun gives the output
    rows asked about). Answers are checked against the first way's."""
    eager = bool({"eager", "compressed"} & set(ways))
    named = [*LAZY, *["fm-lazy"] * ("fm-lazy" in ways), *["eager"] * eager]
    log(f"{case.name}: running the task ({', '.join(named)})")
    runs = {s: als.run(case.task(als), strategy=s, reasons=reasons) for s in LAZY}
    if "fm-lazy" in ways:
        runs["fm-lazy"] = als.run(case.task(als), strategy="fm", reasons="lazy")
    if eager:
        capture = Capture(storage=("pairs", "provrc"))
        runs["eager"] = als.run(case.task(als), backend="eager", capture=capture, reasons=reasons)
    output = runs["rerun"].output
    names = output.columns
    rows = [tuple(r) for r in output.collect()]
    reference = Reference(REFERENCES[case.name], runs["fm"]) if case.name in REFERENCES else None
    rng = random.Random(seed)
    if not rows:
        log(f"{case.name} @{case.scale}: no output rows, no question to ask")
        return
    if reference is None:
        ways = tuple(w for w in ways if w != "duckdb")
    warm = True  # the first size's first question of each way: model loads, compiled code
    for n in dict.fromkeys(min(size, len(rows)) for size in sizes):  # all rows: asked once
        records: list[dict[str, Any]] = []
        seconds: dict[str, list[float]] = {w: [] for w in ways}
        first: dict[str, float] = {}
        jobs: dict[str, list[int]] = {w: [] for w in ways}
        counter = SparkJobs(als.spark)
        engines: set[str] = set()
        agrees = True
        for i in range(-1 if warm else 0, repeat):
            chosen = rng.sample(rows, n)
            given = [dict(zip(names, r)) for r in chosen]
            counts: dict[str, dict[str, int]] = {}
            for way in ways:
                collect_garbage(als.spark)  # untimed: no way pays for the garbage of the one before
                start = time.perf_counter()
                if reference is not None and way == "duckdb":
                    found = reference.ask(
                        pa.Table.from_pylist(given, schema=output.select(*names).toArrow().schema)
                    )
                    took, started = time.perf_counter() - start, None
                    counts[way] = {t: len(v) for t, v in found.items() if v}
                else:
                    strategy, _, engine = way.partition("@")
                    with counter.group() as group:
                        if strategy in ("eager", "compressed"):
                            lin = runs["eager"].lineage(rows=given, backend=strategy)
                        else:
                            lin = runs[strategy].lineage(rows=given, engine=engine or None)
                        answer = lin.to_dict(max_rows=None)
                    took, started = time.perf_counter() - start, counter.count(group)
                    if strategy not in ("eager", "compressed"):
                        engines.add(f"{way}: {lin.engine}")
                    counts[way] = {t: len(v) for t, v in answer["source_lineage"].items() if v}
                if i < 0:  # the warm-up question: kept apart, not in the median
                    first[way] = took
                    continue
                seconds[way].append(took)
                if started is not None:
                    jobs[way].append(started)
            base = next(c for w, c in counts.items() if w != "duckdb")
            agrees &= all(c == base for w, c in counts.items() if w != "duckdb") and (
                "duckdb" not in counts
                or counts["duckdb"] == {t: c for t, c in base.items() if t in counts["duckdb"]}
            )
        warm = False
        for way, values in seconds.items():
            if values:
                records.append(
                    {
                        "case": case.name,
                        "scale": case.scale,
                        "rows": n,
                        "way": way,
                        "seconds": values,
                        "median_ms": statistics.median(values) * 1000,
                        "first_question_ms": first[way] * 1000 if way in first else None,
                        "spark_jobs": jobs[way],
                        "output_rows": len(rows),
                    }
                )
        medians = ", ".join(f"{w} {statistics.median(v) * 1000:.0f}" for w, v in seconds.items() if v)
        if first:
            cold = ", ".join(f"{w} {v * 1000:.0f}" for w, v in first.items())
            log(f"{case.name}: first question (not in the medians), ms: {cold}")
        log(
            f"{case.name} @{case.scale}, {n} row(s), ms: {medians}; "
            f"engines {sorted(engines)}; answers agree: {agrees}"
        )
        records.append({"case": case.name, "rows": n, "agree": agrees, "engines": sorted(engines)})
        yield records


def task_times(
    als: LineageSession, case: LatencyCase, repeat: int, log: Callable[[str], None], reasons: str = "eager"
) -> list[dict]:
    """Task seconds of the rows collected, the rerun run (the paper's Baseline), fm (with
    ``reasons``) and fm with lazy reasons (fm twice only when ``reasons`` is "eager"): a
    warm-up round first, not counted, then in an order that alternates per repetition."""
    actions = {
        "collect": lambda: baseline(als, case.task(als)),
        "rerun": lambda: als.run(case.task(als), strategy="rerun"),
        "fm": lambda: als.run(case.task(als), strategy="fm", reasons=reasons),
        "fm-lazy": lambda: als.run(case.task(als), strategy="fm", reasons="lazy"),
    }
    if reasons != "eager":
        del actions["fm-lazy"]
    log(f"{case.name}: timing the task ({', '.join(actions)}), {repeat} times each after a warm-up")
    seconds: dict[str, list[float]] = {t: [] for t in actions}
    for i, name in interleaved(list(actions), repeat, warmup=1):
        took = timed(actions[name])[0]
        if i >= 0:  # the warm-up round is not counted
            seconds[name].append(took)
    base = statistics.median(seconds["rerun"])
    over = {t: 100 * (statistics.median(v) / base - 1) for t, v in seconds.items()}
    log(
        f"{case.name} task s: "
        + ", ".join(f"{t} {statistics.median(v):.2f} ({over[t]:+.0f} %)" for t, v in seconds.items())
    )
    return [
        {
            "case": case.name,
            "scale": case.scale,
            "task": t,
            "seconds": v,
            "median_s": statistics.median(v),
            "overhead_pct": over[t],
        }
        for t, v in seconds.items()
    ]


def _task_cell(tasks: list[dict[str, Any]], case: str, task: str) -> str:
    found = [r for r in tasks if (r["case"], r["task"]) == (case, task)]
    return f"{found[0]['median_s']:.2f} ({found[0]['overhead_pct']:+.0f} %)" if found else "—"


def markdown(records: list[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = [
        "# Lineage latency, every backend beside hand-written DuckDB",
        "",
        f"Machine: {info['machine']['cpus']} CPUs, load average before/after "
        f"{info['load_before'][0]:.1f}/{info['load_after'][0]:.1f}; repeat {info['repeat']}; "
        f"reasons={info['reasons']!r} for rerun, fm and full; "
        "medians in ms (ratio to the DuckDB reference).",
        "",
        "| case | rows | " + " | ".join(WAYS) + " | answers agree |",
        "|---" * (len(WAYS) + 3) + "|",
    ]
    tasks = [r for r in records if "task" in r]
    if tasks:
        lines[-2:-2] = [
            "Task time (s) and overhead over the paper's Baseline, the rerun run (`collect`: the",
            "rows only collected, nothing written):",
            "",
            "| case | " + " | ".join(TASKS) + " |",
            "|---" * (len(TASKS) + 1) + "|",
            *(
                f"| {c} | " + " | ".join(_task_cell(tasks, c, t) for t in TASKS) + " |"
                for c in dict.fromkeys(r["case"] for r in tasks)
            ),
            "",
            "Lineage latency:",
            "",
        ]
    timed_ = [r for r in records if "way" in r]
    for key in dict.fromkeys((r["case"], r["rows"]) for r in timed_):
        found = {r["way"]: r["median_ms"] for r in timed_ if (r["case"], r["rows"]) == key}
        ref = found.get("duckdb")
        cells = []
        for way in WAYS:
            ms = found.get(way)
            if ms is None:
                cells.append("—")
            else:
                cells.append(f"{ms:.0f}" + (f" ({ms / ref:.1f}×)" if ref and way != "duckdb" else ""))
        agree = next(r["agree"] for r in records if "agree" in r and (r["case"], r["rows"]) == key)
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + f" | {'yes' if agree else 'NO'} |")
    lines += ["", "First question of each way (the warm-up, not in the medians), ms:", ""]
    lines += ["| case | rows | " + " | ".join(WAYS) + " |", "|---" * (len(WAYS) + 2) + "|"]
    for key in dict.fromkeys((r["case"], r["rows"]) for r in timed_ if r.get("first_question_ms")):
        firsts = {r["way"]: r.get("first_question_ms") for r in timed_ if (r["case"], r["rows"]) == key}
        cells = [f"{firsts[w]:.0f}" if firsts.get(w) else "—" for w in WAYS]
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    counted = [w for w in WAYS if w != "duckdb"]
    lines += ["", "Spark jobs per question (median):", "", "| case | rows | " + " | ".join(counted) + " |"]
    lines.append("|---" * (len(counted) + 2) + "|")
    for key in dict.fromkeys((r["case"], r["rows"]) for r in timed_):
        found = {r["way"]: r.get("spark_jobs") for r in timed_ if (r["case"], r["rows"]) == key}
        cells = [f"{statistics.median(found[w]):.0f}" if found.get(w) else "—" for w in counted]
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def case_arguments(parser: argparse.ArgumentParser, cases: str, out: str) -> None:
    """The options of a benchmark over cases (see :func:`parse_cases`)."""
    parser.add_argument("--cases", default=cases, help=f"loan, tpch:Qn, cda:Qn (comma list; default {cases})")
    parser.add_argument("--tpch-sf", default="1", help="TPC-H scale factor (default 1)")
    parser.add_argument("--cda-sf", default="0.01", help="scale factor of the CDA database (default 0.01)")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions per measurement (default 5)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--data", default="bench_data", help="generated data and the results store")
    parser.add_argument("--out", default=out, help=f"output folder (default ./{out})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cda_workload.benchmarks.bench_latency",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    case_arguments(parser, "loan,tpch:Q3,tpch:Q10", "bench_latency")
    parser.add_argument("--task-time", action="store_true", help="also time the task: baseline, fm, fm-lazy")
    parser.add_argument(
        "--reasons",
        choices=("eager", "auto", "lazy"),
        default="eager",
        help="reasons= of the rerun, fm, full and eager runs (default eager: computed while the task "
        "runs; auto or lazy spare the task a model's expensive reasons, and the fm run is then the "
        "fm-lazy one)",
    )
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, SIZES)),
        help="output rows per question (comma list; default 1,100; all rows when the output is smaller)",
    )
    parser.add_argument(
        "--ways",
        default=",".join(WAYS),
        help="the ways to time (comma list; default all). Leaving out eager and compressed spares "
        "their run, which computes every call's reasons while the task runs",
    )
    args = parser.parse_args(argv)
    ways = tuple(w.strip() for w in args.ways.split(",") if w.strip())
    unknown = sorted(set(ways) - set(WAYS))
    if unknown or not ways:
        parser.error(f"unknown ways {unknown}: choose among {', '.join(WAYS)}")
    try:
        sizes = tuple(int(n) for n in args.sizes.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        parser.error(f"--sizes takes positive numbers of rows, comma-separated (got {args.sizes!r})")
    if args.reasons != "eager":  # the fm run then is an fm-lazy run (under "auto", where it pays)
        ways = tuple(w for w in ways if w != "fm-lazy")
    cases = parse_cases(args.cases, args.tpch_sf, args.cda_sf)
    out, data = Path(args.out), Path(args.data)
    out.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    als = LineageSession(store=str(data / "latency-store"), progress=lambda m: None)
    als.spark.sparkContext.setLogLevel("ERROR")
    info: dict[str, Any] = {
        "machine": machine(),
        "repeat": args.repeat,
        "reasons": args.reasons,
        "load_before": os.getloadavg(),
    }
    records: list[dict[str, Any]] = []
    for case in cases:
        log(f"{case.name} @{case.scale}: registering the data")
        case.register(als, data, args.seed)
        if args.task_time:
            records += task_times(als, case, args.repeat, log, args.reasons)
        for found in measure(als, case, args.repeat, args.seed, log, args.reasons, ways, sizes):
            records += found
            info["load_after"] = os.getloadavg()  # written after every size: an interruption keeps them
            (out / "bench_latency.json").write_text(
                json.dumps({**info, "records": records}, indent=2, default=str)
            )
            (out / "bench_latency.md").write_text(markdown(records, info))
    print((out / "bench_latency.md").read_text())
    log(f"wrote {out / 'bench_latency.json'} and {out / 'bench_latency.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

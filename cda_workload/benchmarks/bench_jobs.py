"""Ordinary jobs, as PySpark users write them around models: what lineage costs them.

    python -m cda_workload.benchmarks.bench_jobs --rows 10000 --repeat 3

Five jobs over files read with ``spark.read`` (customers CSV; orders, reviews, payments and
detections Parquet, ``--rows`` orders, the largest table):

- ``retail``: orders LEFT JOIN reviews, ``row_number()`` per customer, a model on the review
  text, customers JOIN that, the top 3, counted by (segment, mood) (``examples/own_job.py``);
- ``reconcile``: orders FULL OUTER JOIN payments, each order classified, counted by status;
- ``rollup``: orders JOIN customers, ``GROUP BY ROLLUP(segment, region)``;
- ``boxes``: a detector's boxes per image (its stored output) parsed by a model, exploded,
  counted by label;
- ``anti``: customers with no large order (NOT EXISTS), counted by segment.

Per job: plain Spark (the job with no lineage, collected), then per configuration (``fm``
and ``eager``) the task's time and its ratio to plain Spark, segments, Spark jobs, bytes
stored, and one output row's question (time, engine, contributing and control rows per
table) beside the same question hand-written in DuckDB over the same files: the rows of the
group the output row counts and, where the answer has control rows, those rows counted too
(the physical limit of an answer; ``duckdb_contributing_s`` is the first part alone). Medians
of ``--repeat``, side by side in one process. Writes ``bench_jobs.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from cda_workload.benchmarks.bench import machine
from reasoning_udfs.text_rules import keyword_sentiment
from reasoning_udfs.udf import ReasoningUDF
from segmenter.errors import LineageError
from tracing import LineageSession

TEXTS = ["good, great value", "bad and terrible", "poor fit", "excellent, love it", "broke at once, bad"]
LABELS = ["person", "car", "dog", "bicycle"]


class BoxLabels(ReasoningUDF):
    """The labels of a detector's boxes scored at least 0.5 (``label:score;…``, the detector's
    stored output): a model's list output, one element per box; the reason gives the scores."""

    name = "bench_box_labels"
    value_type = "array<string>"
    reason_type = "struct<scores: array<double>>"

    def main(self, boxes: str | None) -> list[str]:
        return self.main_with_reason(boxes)[0]

    def main_with_reason(self, boxes: str | None) -> tuple[list[str], dict[str, Any]]:
        found = [b.split(":") for b in (boxes or "").split(";") if b]
        kept = [(label, float(score)) for label, score in found if float(score) >= 0.5]
        return [label for label, _ in kept], {"scores": [s for _, s in kept]}


box_labels = BoxLabels()


def write_files(folder: Path, rows: int) -> None:
    """customers.csv (rows/20), orders/ (rows, 8 files), reviews, payments, detections."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    customers = max(rows // 20, 10)
    ids = np.arange(customers)
    pd.DataFrame({
        "customer_id": ids,
        "name": [f"customer {i}" for i in ids],
        "segment": np.where(ids % 4 == 0, "enterprise", "retail"),
        "region": np.array(["north", "south", "east", "west"])[ids % 4 // 2 + ids % 2 * 2],
    }).to_csv(folder / "customers.csv", index=False)
    order_ids = np.arange(rows)
    orders = pd.DataFrame({
        "order_id": order_ids,
        "customer_id": rng.integers(0, customers - customers // 10, rows),  # a tenth order nothing
        "amount_cents": rng.integers(100, 100_000, rows),
    })
    (folder / "orders").mkdir(exist_ok=True)
    for k, rows_of_file in enumerate(np.array_split(np.arange(rows), 8)):
        orders.iloc[rows_of_file].to_parquet(folder / "orders" / f"part-{k}.parquet", index=False)
    reviewed = order_ids[order_ids % 3 != 2]
    pd.DataFrame({"order_id": reviewed, "text": np.array(TEXTS)[reviewed % 5]}).to_parquet(
        folder / "reviews.parquet", index=False
    )
    paid = order_ids[order_ids % 10 != 3]  # a tenth unpaid; a few payments of no order
    amounts = orders.amount_cents.to_numpy()[paid] + np.where(paid % 50 == 1, 5, 0)
    extra = np.arange(rows, rows + rows // 100)
    pd.DataFrame({
        "payment_id": np.arange(len(paid) + len(extra)),
        "order_id": np.concatenate([paid, extra]),
        "paid_cents": np.concatenate([amounts, rng.integers(100, 100_000, len(extra))]),
    }).to_parquet(folder / "payments.parquet", index=False)
    images = np.arange(max(rows // 10, 10))
    boxes = [
        ";".join(f"{LABELS[(i + j) % 4]}:{((i * 7 + j * 13) % 100) / 100:.2f}" for j in range(i % 4))
        for i in images
    ]
    pd.DataFrame({"image_id": images, "boxes": boxes}).to_parquet(folder / "detections.parquet", index=False)


def _read(spark: SparkSession, folder: Path) -> dict[str, DataFrame]:
    return {
        "customers": spark.read.csv(str(folder / "customers.csv"), header=True, inferSchema=True),
        "orders": spark.read.parquet(str(folder / "orders")),
        "reviews": spark.read.parquet(str(folder / "reviews.parquet")),
        "payments": spark.read.parquet(str(folder / "payments.parquet")),
        "detections": spark.read.parquet(str(folder / "detections.parquet")),
    }


def retail(t: dict[str, DataFrame]) -> DataFrame:
    largest = Window.partitionBy("customer_id").orderBy(F.desc("amount_cents"), "order_id")
    top = (
        t["orders"].join(t["reviews"], "order_id", "left")
        .withColumn("rank", F.row_number().over(largest))
        .filter(F.col("rank") <= 3)
        .withColumn("mood", keyword_sentiment("text"))
    )
    counted = F.count(F.lit(1)).alias("n")
    return t["customers"].join(top, "customer_id").groupBy("segment", "mood").agg(counted)


def reconcile(t: dict[str, DataFrame]) -> DataFrame:
    both = t["orders"].join(t["payments"], "order_id", "full")
    status = (
        F.when(F.col("payment_id").isNull(), "unpaid")
        .when(F.col("amount_cents").isNull(), "unknown order")
        .when(F.col("amount_cents") != F.col("paid_cents"), "amount differs")
        .otherwise("settled")
    )
    return both.withColumn("status", status).groupBy("status").agg(F.count(F.lit(1)).alias("n"))


def rollup(t: dict[str, DataFrame]) -> DataFrame:
    joined = t["orders"].join(t["customers"], "customer_id")
    return joined.rollup("segment", "region").agg(F.sum("amount_cents").alias("total"))


def boxes(t: dict[str, DataFrame]) -> DataFrame:
    labels = t["detections"].select("image_id", F.explode(box_labels("boxes")).alias("label"))
    return labels.groupBy("label").agg(F.count(F.lit(1)).alias("boxes"))


def anti(t: dict[str, DataFrame]) -> DataFrame:
    large = t["orders"].filter(F.col("amount_cents") >= 99_000)
    quiet = t["customers"].join(large, "customer_id", "left_anti")
    return quiet.groupBy("segment").agg(F.count(F.lit(1)).alias("customers"))


@dataclass(frozen=True)
class Job:
    name: str
    build: Callable[[dict[str, DataFrame]], DataFrame]
    where: str  # the output row asked about
    counted: tuple[str, ...]  # the tables whose contributing rows the hand-written query counts
    hand: str  # those counts, hand-written in DuckDB over the same files (the physical limit)
    checked: tuple[str, ...] = ()  # the tables whose control rows ``hand_control`` counts
    hand_control: str | None = None  # the rows only tested for existence or absence
    # ``hand_control`` counts the contributing rows too, then the control rows: the question in
    # one query (control rows that are those not contributing need the first part's rows)
    whole: bool = False

    def keys(self) -> dict[str, str]:
        """customers is named by its key; the other files by file and row position."""
        return {"customers": "customer_id"} if "customers" in self.counted else {}


def _mood(text: str | None) -> str:
    return keyword_sentiment.main(text)


def _labels(text: str | None) -> list[str]:
    return box_labels.main(text)


JOBS = (
    Job("retail", retail, "segment = 'enterprise' AND mood = 'Negative'", ("customers", "orders"), """
        WITH ranked AS (
            SELECT o.*, r.text, row_number() OVER (
                PARTITION BY o.customer_id ORDER BY o.amount_cents DESC, o.order_id) AS rank
            FROM orders o LEFT JOIN reviews r USING (order_id)),
        hits AS (
            SELECT x.customer_id, x.rank FROM customers c JOIN ranked x USING (customer_id)
            WHERE c.segment = 'enterprise' AND x.rank <= 3 AND mood(x.text) = 'Negative')
        SELECT (SELECT count(DISTINCT customer_id) FROM hits), count(DISTINCT r.order_id)
        FROM ranked r JOIN hits h ON r.customer_id = h.customer_id AND r.rank <= h.rank""",
        # a padded order (no review) was checked against every order with a review and those
        # reviews: the control rows are those, less the contributing ones
        ("orders", "reviews"), """
        WITH ranked AS (
            SELECT o.*, r.text, r.order_id IS NOT NULL AS reviewed, row_number() OVER (
                PARTITION BY o.customer_id ORDER BY o.amount_cents DESC, o.order_id) AS rank
            FROM orders o LEFT JOIN reviews r USING (order_id)),
        hits AS (
            SELECT x.customer_id, x.rank FROM customers c JOIN ranked x USING (customer_id)
            WHERE c.segment = 'enterprise' AND x.rank <= 3 AND mood(x.text) = 'Negative'),
        used AS (
            SELECT DISTINCT r.order_id, r.reviewed FROM ranked r JOIN hits h
            ON r.customer_id = h.customer_id AND r.rank <= h.rank),
        matched AS (SELECT order_id FROM orders SEMI JOIN reviews USING (order_id))
        SELECT (SELECT count(DISTINCT customer_id) FROM hits), (SELECT count(*) FROM used),
               (SELECT count(*) FROM matched ANTI JOIN used USING (order_id)),
               (SELECT count(*) FROM reviews SEMI JOIN orders USING (order_id)
                ANTI JOIN used USING (order_id))""", whole=True),
    Job("reconcile", reconcile, "status = 'unpaid'", ("orders",), """
        SELECT count(*) FROM orders o ANTI JOIN payments p USING (order_id)""",
        # an unpaid order is a padded row: every matched order and payment was checked
        ("orders", "payments"), """
        SELECT (SELECT count(*) FROM orders SEMI JOIN payments USING (order_id)),
               (SELECT count(*) FROM payments SEMI JOIN orders USING (order_id))"""),
    Job("rollup", rollup, "segment = 'enterprise' AND region IS NULL", ("customers", "orders"), """
        SELECT count(DISTINCT c.customer_id), count(*)
        FROM orders o JOIN customers c USING (customer_id) WHERE c.segment = 'enterprise'"""),
    Job("boxes", boxes, "label = 'person'", ("detections",), """
        SELECT count(*) FROM detections WHERE list_contains(labels(boxes), 'person')"""),
    Job("anti", anti, "segment = 'retail'", ("customers",), """
        SELECT count(*) FROM customers c
        WHERE c.segment = 'retail' AND NOT EXISTS (
            SELECT 1 FROM orders o WHERE o.customer_id = c.customer_id AND o.amount_cents >= 99000)""",
        # NOT EXISTS checked every customer that has a large order and those orders (of every
        # segment: the segment is the group's, chosen above the check, docs/semantics.md)
        ("customers", "orders"), """
        WITH large AS (
            SELECT o.customer_id FROM orders o JOIN customers c USING (customer_id)
            WHERE o.amount_cents >= 99000)
        SELECT count(DISTINCT customer_id), count(*) FROM large"""),
)
CONFIGS = {"fm": {"strategy": "fm"}, "eager": {"backend": "eager"}}


def _median(way: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, got = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        got = way()
        times.append(time.perf_counter() - started)
    return statistics.median(times), got


def _duckdb(folder: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.create_function("mood", _mood, ["VARCHAR"], "VARCHAR")
    con.create_function("labels", _labels, ["VARCHAR"], "VARCHAR[]")
    con.execute(f"CREATE VIEW customers AS SELECT * FROM read_csv('{folder}/customers.csv', header = true)")
    con.execute(f"CREATE VIEW orders AS SELECT * FROM read_parquet('{folder}/orders/*.parquet')")
    for table in ("reviews", "payments", "detections"):
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{folder}/{table}.parquet')")
    return con


def _jobs_of(als: LineageSession, group: str, work: Callable[[], Any]) -> tuple[float, int, Any]:
    """``work`` timed, with the Spark jobs it started (its own job group)."""
    sc = als.spark.sparkContext
    sc.setJobGroup(group, group)
    try:
        started = time.perf_counter()
        got = work()
        took = time.perf_counter() - started
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return took, len(sc.statusTracker().getJobIdsForGroup(group)), got


def bench_job(als: LineageSession, folder: Path, job: Job, repeat: int) -> dict[str, Any]:
    job.build(_read(als.spark, folder)).collect()  # warm: the first job of a kind pays for code generation
    plain, _ = _median(lambda: job.build(_read(als.spark, folder)).collect(), repeat)
    con = _duckdb(folder)
    alone, counts = _median(lambda: con.execute(job.hand).fetchall(), repeat)
    checked, checks = 0.0, [()]
    if job.hand_control is not None:
        checked, checks = _median(lambda: con.execute(job.hand_control).fetchall(), repeat)  # type: ignore[arg-type]
    hand = checked if job.whole else alone + checked
    if job.whole:  # its first counts are the contributing rows', as the first query's
        assert checks[0][: len(job.counted)] == counts[0], f"{job.name}: {checks[0]} against {counts[0]}"
        checks = [checks[0][len(job.counted) :]]
    found: dict[str, Any] = {
        "plain_s": plain,
        "duckdb_question_s": hand,
        "duckdb_contributing_s": alone,
        "duckdb_rows": list(counts[0]),
        "duckdb_control_rows": list(checks[0]),
    }
    for config, how in CONFIGS.items():
        runs = []
        try:  # warmed as plain Spark is: a run's first job of a kind pays for code generation
            als.run(job.build(_read(als.spark, folder)), keys=job.keys(), **how)
            for k in range(repeat):
                group = f"{job.name}-{config}-{k}"
                task = job.build(_read(als.spark, folder))
                runs.append(_jobs_of(als, group, lambda: als.run(task, keys=job.keys(), **how)))  # noqa: B023
        except LineageError as exc:  # recorded, and the other configurations still measured
            found[config] = {"error": str(exc)}
            print(f"{job.name:9s} {config:5s} failed: {exc}")
            continue
        took = statistics.median(t for t, _, _ in runs)
        run = runs[-1][2]
        asked, lin = _median(lambda: run.lineage(where=job.where), repeat)  # noqa: B023
        tables = sorted(lin.source)
        counted = {t: lin.part_counts(t) for t in tables}  # in Arrow: no Python row made
        contributing = {t: n for t, (n, _) in counted.items()}
        control = {t: n for t, (_, n) in counted.items()}
        found[config] = {
            "task_s": took,
            "overhead": took / plain,
            "segments": len(run.segments().splitlines()),
            "spark_jobs": runs[-1][1],
            "stored_bytes": run.stored_bytes + (run.index_bytes if config == "eager" else 0),
            "question_s": asked,
            "question_vs_duckdb": asked / hand,
            "engine": lin.engine or config,
            "contributing": contributing,
            "control": control,
            "as_duckdb_counts": [contributing.get(t, 0) for t in job.counted] == list(counts[0])
            and [control.get(t, 0) for t in job.checked] == list(checks[0]),
        }
        print(
            f"{job.name:9s} {config:5s} plain {plain:6.2f} s  task {took:6.2f} s ({took / plain:5.1f}x)  "
            f"{found[config]['segments']:2d} segments {found[config]['spark_jobs']:3d} jobs  "
            f"question {asked * 1000:7.1f} ms ({asked / hand:5.1f}x DuckDB {hand * 1000:.1f} ms, "
            f"{found[config]['engine']})  contributing {found[config]['contributing']} "
            f"control {found[config]['control']}  "
            f"{'=' if found[config]['as_duckdb_counts'] else '!='} DuckDB's {list(counts[0])}"
            f"{f' and {list(checks[0])}' if job.checked else ''} (contributing alone {alone * 1000:.1f} ms)"
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", default=",".join(j.name for j in JOBS))
    parser.add_argument("--out", default="bench_results")
    parser.add_argument("--work", default="bench_jobs_data")
    args = parser.parse_args()
    work, out = Path(args.work).resolve(), Path(args.out)
    folder = work / f"files-{args.rows}"
    if not (folder / "detections.parquet").exists():
        write_files(folder, args.rows)
    out.mkdir(parents=True, exist_ok=True)
    als = LineageSession(store=str(work / "store"), mlflow=False)
    load = os.getloadavg()
    results: dict[str, Any] = {
        "rows": args.rows,
        "repeat": args.repeat,
        "machine": machine(),
        "load_before": load,
    }
    for job in JOBS:
        if job.name in args.jobs.split(","):
            results[job.name] = bench_job(als, folder, job, args.repeat)
    results["load_after"] = os.getloadavg()
    (out / "bench_jobs.json").write_text(json.dumps(results, indent=2, default=str))
    print(f"load {load[0]:.1f} -> {results['load_after'][0]:.1f}; wrote {out / 'bench_jobs.json'}")


if __name__ == "__main__":
    main()

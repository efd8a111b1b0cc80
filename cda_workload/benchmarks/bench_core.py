"""Core-engine benchmark: task time and lineage-derivation time under each strategy.

    python -m cda_workload.benchmarks.bench_core --sf 0.1 --repeat 5 --out bench_core

Tasks: the paper's loan example (lineage of ⟨Reject, 1⟩) and a TPC-H Q3-shaped query with a
keyword-sentiment UDF filter on line items (lineage of one output row, a different seeded row
each repetition). Prints medians and writes ``<out>/bench_core.json``. Every repetition builds
fresh DataFrames, so no shuffle output is reused between repetitions.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cda_workload.benchmarks.bench import timed
from cda_workload.workloads.loan_example import loan_task, register_loan_tables
from cda_workload.workloads.tpch import generate, register_tpch
from materialization.strategies import STRATEGIES
from reasoning_udfs.text_rules import keyword_sentiment
from tracing import LineageSession


def q3_sentiment(als: LineageSession) -> DataFrame:
    """TPC-H Q3 restricted to line items whose comment reads negative."""
    customer = als.table("customer").filter("c_mktsegment = 'BUILDING'")
    orders = als.table("orders").filter("o_orderdate < date '1995-03-15'")
    items = als.table("lineitem").filter("l_shipdate > date '1995-03-15'")
    items = items.filter(keyword_sentiment("l_comment") == "Negative")
    joined = customer.join(orders, customer.c_custkey == orders.o_custkey).join(
        items, items.l_orderkey == orders.o_orderkey
    )
    revenue = F.sum(F.col("l_extendedprice") * (1 - F.col("l_discount"))).alias("revenue")
    grouped = joined.groupBy("l_orderkey", "o_orderdate", "o_shippriority").agg(revenue)
    return grouped.orderBy(F.desc("revenue"), "o_orderdate").limit(10)


def bench_task(
    als: LineageSession,
    name: str,
    build: Callable[[LineageSession], DataFrame],
    targets: Callable[[int], dict[str, Any]],
    repeat: int,
    log: Callable[[str], None],
) -> list[dict[str, Any]]:
    records = []
    for strategy in STRATEGIES:
        task_seconds, runs = [], []
        for _ in range(max(1, repeat // 2)):
            seconds, run = timed(lambda s=strategy: als.run(build(als), strategy=s))
            task_seconds.append(seconds)
            runs.append(run)
        run = runs[-1]
        derive_seconds = [timed(lambda i=i, r=run: r.lineage(**targets(i)))[0] for i in range(repeat)]
        for phase, seconds in (("task", task_seconds), ("derive", derive_seconds)):
            records.append(
                {
                    "task": name,
                    "strategy": strategy,
                    "phase": phase,
                    "al_size": 1 if phase == "derive" else None,
                    "seconds": seconds,
                    "median_s": statistics.median(seconds),
                    "stored_tuples": run.stored_tuples,
                    "stored_bytes": run.stored_bytes,
                }
            )
        log(
            f"{name:14s} {strategy:5s} task {statistics.median(task_seconds):7.2f} s   "
            f"derive(1 row) {statistics.median(derive_seconds):6.2f} s   stored {run.stored_tuples} tuples"
        )
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cda_workload.benchmarks.bench_core",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--sf", type=float, default=0.1, help="TPC-H scale factor (default 0.1)")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions per measurement (default 5)")
    parser.add_argument("--out", default="bench_core", help="output folder (default ./bench_core)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    als = LineageSession(store=str(out / "store"), progress=lambda m: None)
    als.spark.sparkContext.setLogLevel("ERROR")
    log("registering the loan example")
    register_loan_tables(als)
    log(f"generating TPC-H SF {args.sf} with tpchgen-cli and registering it")
    register_tpch(als, generate(args.sf, out / f"tpch-sf{args.sf}"), ("customer", "orders", "lineitem"))
    records = bench_task(als, "loan", loan_task, lambda i: {"rows": [("Reject", 1)]}, args.repeat, log)
    records += bench_task(
        als, f"q3_sentiment_sf{args.sf}", q3_sentiment, lambda i: {"sample": 1, "seed": i}, args.repeat, log
    )
    machine = {
        "python": platform.python_version(),
        "cpus": __import__("os").cpu_count(),
        "platform": platform.platform(),
        "spark_master": als.spark.sparkContext.master,
    }
    (out / "bench_core.json").write_text(json.dumps({"machine": machine, "records": records}, indent=2))
    log(f"wrote {out / 'bench_core.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

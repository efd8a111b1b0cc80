"""Confidence-backend benchmark on the Trio paper's TPC-H derivation DAG (its section 7).

    python -m cda_workload.benchmarks.bench_confidence --sf 0.01 --repeat 3 --out docs/bench/confidence

Orders, line items and part-supplies are made uncertain (each row true with a probability
drawn from its key). OL = δ(O ⋈ L), LP = δ(L ⋈ P) and OLP = δ(OL ⋈ LP) are one task whose
DISTINCT subqueries are derived relations (segments), so OLP's lineage refers to OL's and LP's
rows, which share line items: deep, dependent lineage. Measured, medians of ``--repeat``:

- task time with and without boolean lineage (``strategy="full"`` vs ``backend="confidence"``);
- batch confidences of all of OLP with Indep + memoization (Batch-I) and without (Batch-NI);
- tuple-level confidences of 1, 10, 100 rows, and the crossover fraction above which the
  batch job is cheaper than asking row by row;
- batch time against the fraction of orders kept (selectivity).

Prints a table and writes ``<out>/bench_confidence.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from cda_workload.benchmarks.bench import timed
from cda_workload.workloads.tpch import PRIMARY_KEYS, generate
from tracing import LineageSession
from tracing.session import Run

UNCERTAIN = ("orders", "lineitem", "partsupp")


def olp(keep_every: int) -> str:
    """OLP over the orders whose key is a multiple of ``keep_every`` (the selectivity knob)."""
    return f"""
        WITH ol AS (SELECT DISTINCT o.o_orderkey, l.l_partkey, l.l_suppkey
                    FROM orders o JOIN lineitem l ON o.o_orderkey = l.l_orderkey
                    WHERE o.o_orderkey % {keep_every} = 0),
             lp AS (SELECT DISTINCT l.l_partkey, l.l_suppkey, ps.ps_availqty
                    FROM lineitem l JOIN partsupp ps
                      ON l.l_partkey = ps.ps_partkey AND l.l_suppkey = ps.ps_suppkey)
        SELECT DISTINCT ol.o_orderkey, ol.l_partkey
        FROM ol JOIN lp ON ol.l_partkey = lp.l_partkey AND ol.l_suppkey = lp.l_suppkey"""


def register(als: LineageSession, data: Path) -> None:
    """The three uncertain tables: p = 0.5 .. 0.99 from a hash of the key."""
    for table in UNCERTAIN:
        df = als.spark.read.parquet(str(data.resolve() / f"{table}.parquet"))
        keys = [F.col(k) for k in PRIMARY_KEYS[table]]
        df = df.withColumn("conf", 0.5 + F.pmod(F.xxhash64(*keys), F.lit(50)) / 100.0)
        als.register_table(table, df, key=PRIMARY_KEYS[table], confidence="conf")


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def _batch_seconds(run: Run, algorithm: str) -> float:
    seconds, _ = timed(lambda: run.confidence_table(algorithm=algorithm).agg(F.sum("probability")).collect())
    return seconds


def bench(als: LineageSession, sf: float, repeat: int, keeps: list[int], log: Any) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []

    def record(phase: str, seconds: list[float], **extra: Any) -> None:
        rec = {"sf": sf, "phase": phase, "median_s": _median(seconds), "seconds": seconds, **extra}
        records.append(rec)
        log(f"{phase:<28} {rec['median_s']:9.3f} s  {json.dumps(extra)}")

    plain = [timed(lambda: als.run(als.sql(olp(1)), strategy="full"))[0] for _ in range(repeat)]
    timed_runs = [timed(lambda: als.run(als.sql(olp(1)), backend="confidence")) for _ in range(repeat)]
    run = timed_runs[-1][1]
    rows = run.record["output"]["rows"]
    record("task full (no formulas)", plain)
    record(
        "task confidence backend", [s for s, _ in timed_runs], rows=rows,
        lineage_rows=run.record["confidence"]["rows"]["lineage"],
        facts=run.record["confidence"]["rows"]["facts"], bytes=run.record["confidence"]["bytes"],
    )
    batch = {}
    for algorithm, name in (("indep", "Batch-I"), ("basic", "Batch-NI")):
        seconds = [_batch_seconds(run, algorithm) for _ in range(repeat)]
        batch[algorithm] = _median(seconds)
        record(f"batch {name} (all rows)", seconds, rows=rows)
    for n in (1, 10, 100):
        asks = [lambda n=n, s=seed: run.confidence(sample=n, seed=s, explain=0) for seed in range(repeat)]
        seconds = [timed(ask)[0] for ask in asks]
        per_row = _median(seconds) / n
        record(
            f"tuple-level {n} row(s)", seconds, per_row_s=per_row,
            crossover_fraction=min(1.0, batch["indep"] / (per_row * rows)) if rows else None,
        )
    for keep in keeps:
        sel_run = als.run(als.sql(olp(keep)), backend="confidence")
        seconds = [_batch_seconds(sel_run, "indep") for _ in range(repeat)]
        kept = sel_run.record["output"]["rows"]
        record(f"batch Batch-I orders 1/{keep}", seconds, rows=kept, keep_every=keep)
    return records


def _markdown(records: list[dict[str, Any]]) -> str:
    lines = ["| SF | phase | median s | details |", "|---|---|---|---|"]
    for r in records:
        extra = {k: v for k, v in r.items() if k not in ("sf", "phase", "median_s", "seconds")}
        lines.append(f"| {r['sf']} | {r['phase']} | {r['median_s']:.3f} | {json.dumps(extra)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m cda_workload.benchmarks.bench_confidence",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--sf", default="0.01", help="comma-separated TPC-H scale factors (default 0.01)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", default="100,10,1", help="selectivity: keep orders whose key is a multiple")
    parser.add_argument("--data", default="al_data/confidence", help="where TPC-H data is generated")
    parser.add_argument("--store", default="bench_out/confidence_store")
    parser.add_argument("--out", default="bench_out/confidence")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []
    for sf in [float(s) for s in args.sf.split(",")]:
        als = LineageSession(store=f"{args.store}/sf{sf}")
        als.spark.sparkContext.setLogLevel("ERROR")
        print(f"SF {sf}: generating and registering TPC-H (orders, lineitem, partsupp uncertain)", flush=True)
        register(als, generate(sf, f"{args.data}/sf{sf}"))
        records += bench(als, sf, args.repeat, [int(k) for k in args.keep.split(",")], print)
        body = {"machine": platform.platform(), "cpus": os.cpu_count(), "records": records}
        (out / "bench_confidence.json").write_text(json.dumps(body, indent=2))
        (out / "bench_confidence.md").write_text(_markdown(records))
    print(f"wrote {out}/bench_confidence.json and .md")


if __name__ == "__main__":
    main()

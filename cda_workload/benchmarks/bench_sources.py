"""What reading sources in place costs: fingerprints, the check a question makes, and the
copy that CSV (and ``snapshot="copy"``) needs, per GB of the user's files.

    python -m cda_workload.benchmarks.bench_sources --rows 4000000 --repeat 3

Writes one table of ``--rows`` rows (an order line: ids, a date, decimals, a 40-character
comment) as Parquet in 8 files and as one CSV file, then times, median of ``--repeat``:

- ``fingerprint content``: size, time, row count and the sha256 of every byte;
- ``fingerprint footer``: the same with the Parquet footers' sha256 in place of the content;
- ``check``: what a question does before it starts (a stat per file; the footers again);
- ``copy``: Spark reads the files and writes them into the store with row ids (what a CSV
  source costs once per version of its files, and ``register_table`` costs every time).

Prints seconds and seconds per GB, writes ``bench_sources.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cda_workload.benchmarks.bench import machine
from materialization import fingerprints
from materialization.compile import source_rows
from segmenter.operators import Source
from segmenter.sources import local_file
from tracing import LineageSession


def _write(als: LineageSession, folder: Path, rows: int) -> None:
    table = als.spark.range(rows).selectExpr(
        "id AS order_line",
        "id % 1000003 AS customer_id",
        "date_add(DATE'2020-01-01', CAST(id % 1500 AS INT)) AS ordered",
        "CAST((id * 7919) % 100000 / 100 AS DECIMAL(12, 2)) AS amount",
        "substr(sha2(CAST(id AS STRING), 256), 1, 40) AS comment",
    )
    table.repartition(8).write.mode("overwrite").parquet(str(folder / "lines.parquet"))
    table.coalesce(1).write.mode("overwrite").option("header", True).csv(str(folder / "lines.csv"))


def _leaf(als: LineageSession, path: Path, fmt: str) -> Source:
    reader = als.spark.read.option("header", True).schema(
        "order_line bigint, customer_id bigint, ordered date, amount decimal(12,2), comment string"
    )
    task = als.parse(reader.format(fmt).load(str(path)))
    return next(n for n in task.root.walk() if isinstance(n, Source))


def _timed(way: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        way()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _measure(als: LineageSession, leaf: Source, repeat: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    limit = fingerprints.CONTENT_BYTES
    try:
        fingerprints.CONTENT_BYTES = 1 << 62
        figures["fingerprint content"] = _timed(lambda: fingerprints.fingerprint(leaf), repeat)
        if leaf.files is not None and leaf.files.format == "parquet":
            fingerprints.CONTENT_BYTES = 0
            figures["fingerprint footer"] = _timed(lambda: fingerprints.fingerprint(leaf), repeat)
            entry = fingerprints.fingerprint(leaf)
            figures["check"] = _timed(lambda: fingerprints.check_fingerprints([entry], "bench", 0), repeat)
    finally:
        fingerprints.CONTENT_BYTES = limit
    rows = source_rows(als.spark, leaf)
    figures["copy"] = _timed(
        lambda: als.store.register_source("lines", rows, leaf.key_names, folder="copies"), repeat
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default="bench_results")
    parser.add_argument("--work", default="bench_sources_data")
    args = parser.parse_args()
    work, out = Path(args.work).resolve(), Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    als = LineageSession(store=str(work / "store"), mlflow=False)
    _write(als, work, args.rows)
    load = os.getloadavg()
    results: dict[str, Any] = {
        "rows": args.rows,
        "repeat": args.repeat,
        "machine": machine(),
        "load_before": load,
    }
    for fmt, name in (("parquet", "lines.parquet"), ("csv", "lines.csv")):
        leaf = _leaf(als, work / name, fmt)
        assert leaf.files is not None
        size = sum(os.path.getsize(p) for p in (local_file(f) for f in leaf.files.paths) if p)
        figures = _measure(als, leaf, args.repeat)
        gb = size / 1e9
        results[fmt] = {
            "bytes": size,
            "files": len(leaf.files.paths),
            "seconds": figures,
            "seconds_per_gb": {k: v / gb for k, v in figures.items()},
        }
        print(f"{fmt}: {size / 1e6:,.0f} MB in {len(leaf.files.paths)} file(s)")
        for k, v in figures.items():
            print(f"  {k:20s} {v:8.3f} s   {v / gb:8.2f} s/GB")
    results["load_after"] = os.getloadavg()
    (out / "bench_sources.json").write_text(json.dumps(results, indent=2))
    print(f"load {load[0]:.1f} -> {results['load_after'][0]:.1f}; wrote {out / 'bench_sources.json'}")


if __name__ == "__main__":
    main()

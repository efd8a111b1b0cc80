"""What the results store's integrity checks cost.

    python -m cda_workload.benchmarks.bench_integrity --cases loan,tpch:Q3 --tpch-sf 1 --repeat 5

For each case the task runs once under full and once with the eager backend; then, for each
run, repeated with the ways alternating and the process's hash cache emptied each time:

- ``sizes``: the check of every listed file's size (a listing; what opening a run always does);
- ``content``: sizes and the sha256 of every byte of the run and of the snapshots it read (what
  opening a run does while they hold at most ``AL_VERIFY_BYTES``, 256 MiB by default);
- ``open``: ``load_run`` as a question does it (record, expression check, the checks above);
- ``question``: ``load_run`` and a one-row question, for scale;
- ``verify``: what ``al verify RUN`` does (every byte, caches included).

Prints medians and writes ``bench_integrity.json`` and ``bench_integrity.md`` under ``--out``.
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
from cda_workload.benchmarks.bench_latency import case_arguments, parse_cases
from materialization import integrity
from materialization.capture import Capture
from tracing import LineageSession, Run


def _ways(als: LineageSession, run: Run) -> dict[str, Callable[[], Any]]:
    catalog = als.store.catalog

    def check(content: bool) -> None:
        found = integrity.Check(catalog.fs, content=content)
        integrity.check_run(catalog, run.record, found)
        found.raise_any(f"run {run.id}")

    return {
        "sizes": lambda: check(False),
        "content": lambda: check(True),
        "open": lambda: als.load_run(run.id),
        "question": lambda: als.load_run(run.id).lineage(sample=1).to_dict(max_rows=None),
        "verify": lambda: integrity.verify(catalog, [run.id]),
    }


def measure(als: LineageSession, run: Run, repeat: int) -> dict[str, Any]:
    ways = _ways(als, run)
    times: dict[str, list[float]] = {w: [] for w in ways}
    for _ in range(repeat):
        for name, way in ways.items():
            integrity._SEEN.clear()  # every way hashes from cold
            started = time.perf_counter()
            way()
            times[name].append(time.perf_counter() - started)
    run_bytes = sum(size for size, _ in run.record["files"].values())
    snapshots = [s for s, _ in run.record["inputs"]]
    source_bytes = sum(als.store.size(s) for s in snapshots)
    return {
        "run": run.id,
        "backend": run.backend,
        "strategy": run.strategy,
        "files": len(run.record["files"]),
        "run_bytes": run_bytes,
        "source_bytes": source_bytes,
        "median_s": {w: statistics.median(t) for w, t in times.items()},
        "times_s": times,
    }


def markdown(records: list[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = [
        f"Machine: {info['machine']['cpus']} CPUs; medians of {info['repeat']}, hash cache emptied before "
        "each; budget AL_VERIFY_BYTES = 256 MiB.",
        "",
        "| case | run | files | run MB | sources MB | sizes | content | open | question | verify |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        m = r["median_s"]
        lines.append(
            f"| {r['case']} | {r['backend']}/{r['strategy']} | {r['files']} | {r['run_bytes'] / 1e6:.1f} | "
            f"{r['source_bytes'] / 1e6:.1f} | "
            + " | ".join(f"{m[w] * 1000:.0f} ms" for w in ("sizes", "content", "open", "question", "verify"))
            + " |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cda_workload.benchmarks.bench_integrity",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    case_arguments(parser, "loan,tpch:Q3", "bench_integrity")
    args = parser.parse_args(argv)
    cases = parse_cases(args.cases, args.tpch_sf, args.cda_sf)
    out, data = Path(args.out), Path(args.data)
    out.mkdir(parents=True, exist_ok=True)
    als = LineageSession(store=str(data / "integrity-store"), progress=lambda m: None)
    als.spark.sparkContext.setLogLevel("ERROR")
    info: dict[str, Any] = {"machine": machine(), "repeat": args.repeat, "load_before": os.getloadavg()}
    records = []
    for case in cases:
        print(f"[{time.strftime('%H:%M:%S')}] {case.name} @{case.scale}: registering, running full and eager")
        case.register(als, data, args.seed)
        task = case.task(als)
        runs = [als.run(task, strategy="full"), als.run(task, backend="eager", capture=Capture())]
        records += [{"case": f"{case.name}@{case.scale}", **measure(als, run, args.repeat)} for run in runs]
        info["load_after"] = os.getloadavg()
        (out / "bench_integrity.json").write_text(json.dumps({**info, "records": records}, indent=2))
        (out / "bench_integrity.md").write_text(markdown(records, info))
    print((out / "bench_integrity.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

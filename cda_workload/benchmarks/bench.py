"""The benchmark runner of section 7: task time (Figs. 7/10), augmented-lineage derivation
time (Figs. 8/9/11/12) and stored intermediates (Tables 2/4) per query and strategy.

Each measurement builds a fresh DataFrame from the query text, so no repetition reuses the
shuffle output of another; derivation picks seeded random output rows, a different draw per
repetition. Results go to ``bench.json`` (a list of records), ``bench.md`` (tables), PNG plots
and, when tracking is on, an MLflow run.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Row

from cda_workload.workloads.cda_queries import QUERIES, query_names
from cda_workload.workloads.extended_tpch import generate_extended
from cda_workload.workloads.lfw import generate_lfw, lfw_query, register_lfw
from cda_workload.workloads.tpch import register_tpch
from cda_workload.workloads.udfs import register_udfs
from materialization.compile import Compiler, finish, visible
from tracing import LineageSession

Log = Callable[[str], None]


@dataclass(frozen=True)
class Case:
    """One query of one workload at one scale (a TPC-H scale factor or an LFW size)."""

    workload: str
    query: str
    scale: str
    sql: str

    @property
    def sf(self) -> float | None:
        return float(self.scale) if self.workload == "cda" else None


def cda_cases(scale_factors: list[float], queries: str) -> list[Case]:
    return [Case("cda", q, str(sf), QUERIES[q]) for sf in scale_factors for q in query_names(queries)]


def lfw_cases(sizes: list[str], recognizers: list[str]) -> list[Case]:
    return [Case("lfw", r, size, lfw_query(r)) for size in sizes for r in recognizers]


def prepare(als: LineageSession, case: Case, data_root: Path, seed: int) -> None:
    """Generate (once) and register the database the case reads."""
    if case.workload == "cda":
        register_tpch(
            als, generate_extended(float(case.scale), data_root / f"tpch-sf{case.scale}-s{seed}", seed)
        )
    else:
        register_lfw(als, generate_lfw(case.scale, data_root / f"lfw-{case.scale}-s{seed}", seed))
    register_udfs(als.spark, case.workload)


def baseline(als: LineageSession, sql: str | DataFrame) -> list[Row]:
    """The task's rows in normal mode, storing nothing (the paper's Baseline): the operator
    tree compiled as is, so each model runs exactly where its φ sits, as under the strategies
    (plain Spark would push a UDF filter below the joins and call the model on more rows)."""
    task = als.parse(sql)
    return visible(task, finish(task, Compiler(als.spark, "normal").compile(task.root))).collect()


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def interleaved(names: list[str], repeat: int, warmup: int) -> Iterator[tuple[int, str]]:
    """(repetition, name) for each of ``names`` per repetition: ``warmup`` rounds first (a
    negative repetition: not to be counted, as the first runs of a query shape compile its
    code), then ``repeat``, the order reversed every other round so that no way always runs
    after the same one."""
    for i in range(-warmup, repeat):
        yield from ((i, name) for name in (names if i % 2 == 0 else names[::-1]))


def _record(
    case: Case, strategy: str, phase: str, al_size: int | None, seconds: list[float], **extra: Any
) -> dict:
    return {
        "workload": case.workload,
        "query": case.query,
        "sf": case.sf,
        "size": case.scale if case.workload == "lfw" else None,
        "strategy": strategy,
        "phase": phase,
        "al_size": al_size,
        "seconds": seconds,
        "median_s": statistics.median(seconds) if seconds else None,
        **extra,
    }


def measure(
    als: LineageSession,
    case: Case,
    strategies: list[str],
    al_sizes: list[int],
    repeat: int,
    log: Log,
) -> Iterator[dict[str, Any]]:
    """Records for one case: Baseline task time, then per strategy task and derive times."""
    label = f"{case.workload} {case.query} @{case.scale}"
    seconds = [timed(lambda: baseline(als, case.sql))[0] for _ in range(repeat)]
    log(f"{label}: baseline task {statistics.median(seconds):.2f} s")
    yield _record(case, "baseline", "task", None, seconds, stored_tuples=0, stored_bytes=0)
    for strategy in strategies:
        timings, runs = [], []
        for _ in range(repeat):
            spent, run = timed(lambda s=strategy: als.run(als.sql(case.sql), strategy=s, reasons="eager"))
            timings.append(spent)
            runs.append(run)
        run = runs[-1]
        stored = {"stored_tuples": run.stored_tuples, "stored_bytes": run.stored_bytes}
        rows = run.output.count()
        log(f"{label}: {strategy} task {statistics.median(timings):.2f} s, {rows} output rows, {stored}")
        yield _record(case, strategy, "task", None, timings, output_rows=rows, **stored)
        for size in al_sizes:
            if rows < size:
                log(f"{label}: {strategy} AL_size {size} skipped (only {rows} output rows)")
                continue
            derive = [timed(lambda i=i, n=size, r=run: r.lineage(sample=n, seed=i))[0] for i in range(repeat)]
            log(f"{label}: {strategy} derive AL_size {size}: {statistics.median(derive):.2f} s")
            yield _record(case, strategy, "derive", size, derive, output_rows=rows, **stored)


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
    }

"""How much of TPC-H, written as the specification writes it, the lineage engine accepts.

    python -m cda_workload.benchmarks.tpch_coverage --sf 0.01 --queries all --sample 3 --out tpch_coverage

The benchmarks run TPC-H queries hand-rewritten into joins; users write correlated
subqueries, EXISTS / NOT EXISTS / IN / NOT IN, scalar subqueries, outer joins and views. This
command takes the 22 queries of ``cda_workload.workloads.tpch_queries`` (the specification's text with
its validation parameters) and, for each, one query at a time on local Spark:

1. computes plain Spark's answer (``als.sql(q).collect()``);
2. runs the task lazily (``strategy="fm"``) and eagerly (``backend="eager"``), and checks each
   run's output equals Spark's answer as a multiset;
3. draws up to ``--sample`` output rows (seeded) and asks the lineage of each row of both runs,
   comparing the source lineage: the lazy tracing queries must name the rows the eager
   indexes captured.

With ``--repeat N`` it also measures what the lineage costs (issue 48's table): after the
checked pass, N rounds each run plain Spark, fm, eager (and compressed, with ``--compressed``)
alternating, the medians giving each way's task time over plain Spark's warm one; each asked
row's question is timed alone (``run.lineage(rows=[row])``, the answer's Arrow tables, no
Python rows), with its contributing and control row counts; each run's store bytes; and the
child's peak memory, the Python driver's and the JVM's (``VmHWM``), over all of its runs.

    python -m cda_workload.benchmarks.tpch_coverage --sf 1 --queries all --sample 1 --repeat 3 --compressed

Each query gets a status: ``traced`` (both outputs right, lazy == eager on every sampled row),
``disagrees`` (the tables whose lineage differs), ``refused`` (the engine's one-line
``LineageError``, the phase that raised it), or ``error`` (any other exception, or an output
that differs from Spark's: a bug to report). A query with no output row is ``traced`` only if
both outputs are right; its note says no row was asked.

One query failing does not stop the others: each query runs in a child process of its own
(its own Spark driver), so a driver killed by an OutOfMemoryError or a hang past ``--timeout``
costs only that query; the child's log is kept in ``--out``/logs/<query>.log. ``--in-process``
runs every query in this process instead (one JVM start, for quick loops). Rows of the table go
to stdout as they come, progress to stderr; ``tpch_coverage.json`` and ``tpch_coverage.md`` are
written under ``--out`` after every query.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from cda_workload.benchmarks.bench import machine
from cda_workload.benchmarks.bench_eager import engine_fingerprint
from cda_workload.command_line.progress import Progress
from cda_workload.workloads.tpch import PRIMARY_KEYS, generate, register_tpch
from cda_workload.workloads.tpch_queries import QUERIES
from segmenter.errors import LineageError
from tracing import LineageSession, Run

Log = Callable[[str], None]
SourceLineage = dict[str, pa.Table]  # table -> its rows in an answer


@dataclass
class Outcome:
    """What one query gave; ``phase`` names the step that failed (spark, fm, eager, lineage)."""

    query: str
    status: str = "traced"
    detail: str = ""
    phase: str = ""
    error_type: str = ""
    output_rows: int | None = None
    sampled: int = 0
    spark_s: float | None = None
    task_s: dict[str, float] = field(default_factory=dict)  # fm, eager
    lineage_s: dict[str, float] = field(default_factory=dict)  # fm, eager: summed over the rows
    lineage_rows: list[dict[str, int]] = field(default_factory=list)  # per sampled row: table -> rows
    rounds_s: dict[str, list[float]] = field(default_factory=dict)  # --repeat: way (plain too) -> seconds
    question_s: dict[str, list[float]] = field(default_factory=dict)  # way -> each asked row's answer
    parts: list[dict[str, list[int]]] = field(default_factory=list)  # per row: table -> [contrib., control]
    store_bytes: dict[str, int] = field(default_factory=dict)  # way -> its run's folder
    peak_mb: dict[str, float] = field(default_factory=dict)  # driver, jvm: the child's high-water marks
    engine: str = field(default_factory=engine_fingerprint)  # the engine's source this query ran on


class Failed(Exception):
    """Ends a query's measurement with a status; raised by the steps below."""

    def __init__(self, status: str, phase: str, detail: str, error_type: str = "") -> None:
        super().__init__(detail)
        self.status, self.phase, self.detail, self.error_type = status, phase, detail, error_type


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def describe(exc: BaseException) -> str:
    """Type and first line; for a Java error (Py4J's "An error occurred while calling ...") also
    its root cause, the last ``Caused by:`` of the JVM's trace or else the exception it names."""
    text = str(exc).strip()
    line = f"{type(exc).__name__}: {first_line(exc)}"
    if "An error occurred while calling" not in text:
        return line
    causes = re.findall(r"^Caused by: (.+)$", text, flags=re.MULTILINE)
    named = re.findall(r"^: (\S+(?:Exception|Error)\b.*)$", text, flags=re.MULTILINE)
    cause = (causes or named or [""])[-1]
    return f"{line} {cause[:300]}".strip()


def step(phase: str, action: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds and result of ``action``; a raised exception becomes a ``Failed`` of ``phase``."""
    start = time.perf_counter()
    try:
        result = action()
    except LineageError as exc:
        raise Failed("refused", phase, first_line(exc), type(exc).__name__) from exc
    except Exception as exc:  # any other failure is the bug this command reports
        raise Failed("error", phase, describe(exc), type(exc).__name__) from exc
    return time.perf_counter() - start, result


def normal(value: Any) -> Any:
    """A value comparable across engines: floats to 12 significant digits, the rest as is."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, (list, tuple)):
        return tuple(normal(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, normal(v)) for k, v in value.items()))
    return value


def multiset(rows: Iterable[Any]) -> Counter:
    return Counter(normal(tuple(r)) for r in rows)


def compare_output(phase: str, run: Run, expected: Counter) -> list[tuple]:
    """The run's output rows, if they equal Spark's answer as a multiset (else ``Failed``)."""
    _, rows = step(phase, lambda: [tuple(r) for r in run.output.collect()])
    got = multiset(rows)
    if got != expected:
        missing, extra = expected - got, got - expected
        example = next(iter(missing or extra))
        raise Failed(
            "error",
            phase,
            f"output differs from Spark's: {sum(missing.values())} row(s) missing, "
            f"{sum(extra.values())} extra (of {sum(expected.values())}); e.g. "
            f"{'missing' if missing else 'extra'} {example}",
            "OutputMismatch",
        )
    return rows


def source_lineage(answer: Any) -> SourceLineage:
    """``{table: its rows}`` of a lineage answer as Arrow tables (an answer of a million rows
    is compared without becoming Python rows, which would be the bench's memory, not the
    engine's), tables without rows left out."""
    return {t: rows for t in answer.source if (rows := answer.to_arrow(t)).num_rows}


def differences(lazy: SourceLineage, other: SourceLineage, way: str = "eager") -> list[str]:
    """One phrase per table whose lineage differs (as multisets, in DuckDB): its row counts
    under each way."""
    out = []
    con = duckdb.connect()
    for table in sorted(set(lazy) | set(other)):
        a, b = lazy.get(table), other.get(table)
        if a is not None and b is not None:
            con.register("a", a)
            con.register("b", b.select(a.column_names).cast(a.schema))
            only = [con.sql(f"SELECT count(*) FROM (FROM {x} EXCEPT ALL FROM {y})").fetchall()[0][0]
                    for x, y in (("a", "b"), ("b", "a"))]  # fmt: skip
        else:
            only = [a.num_rows if a is not None else 0, b.num_rows if b is not None else 0]
        if any(only):
            out.append(
                f"{table}: fm {a.num_rows if a is not None else 0} rows, {way} "
                f"{b.num_rows if b is not None else 0} ({only[0]} only fm, {only[1]} only {way})"
            )
    return out


def ask(outcome: Outcome, way: str, run: Run, rows: list[dict[str, Any]]) -> SourceLineage:
    """The rows' source lineage; the answer's own time (Arrow tables, before any Python row
    is made for the comparison) kept in ``outcome.question_s``."""
    started = time.perf_counter()
    answer = run.lineage(rows=rows)
    outcome.question_s.setdefault(way, []).append(time.perf_counter() - started)
    if way == "eager":
        outcome.parts.append({t: list(answer.part_counts(t)) for t in sorted(answer.source)})
    return source_lineage(answer)


def trace(outcome: Outcome, runs: dict[str, Run], names: list[str], chosen: list[tuple]) -> None:
    """Asks each chosen row of every run; ``Failed("disagrees")`` at the first row where a
    run's answer differs from fm's."""
    outcome.lineage_s = {way: 0.0 for way in runs}
    for row in chosen:
        given = [dict(zip(names, row))]
        found: dict[str, SourceLineage] = {}
        for way, run in runs.items():
            seconds, found[way] = step(f"lineage ({way})", partial(ask, outcome, way, run, given))
            outcome.lineage_s[way] += seconds
        outcome.sampled += 1
        outcome.lineage_rows.append({t: rows.num_rows for t, rows in sorted(found["fm"].items())})
        for way in [w for w in runs if w != "fm"]:
            diff = differences(found["fm"], found[way], way)
            if diff:
                raise Failed("disagrees", "lineage", f"{way}, row {given[0]}: " + "; ".join(diff))


WAYS: dict[str, dict[str, Any]] = {
    "fm": {"strategy": "fm"}, "eager": {"backend": "eager"}, "compressed": {"backend": "compressed"},
}


def rounds(
    als: LineageSession, outcome: Outcome, sql: str, ways: dict[str, dict[str, Any]], repeat: int, log: Log
) -> None:
    """``repeat`` rounds of plain Spark and each way, alternating (a round's ratios share its
    load), each run's folder deleted after it."""
    for k in range(repeat):
        seconds, _ = step("spark", lambda: als.sql(sql).collect())
        outcome.rounds_s.setdefault("plain", []).append(seconds)
        for way, options in ways.items():
            seconds, run = step(way, partial(als.run, als.sql(sql), **options))
            outcome.rounds_s.setdefault(way, []).append(seconds)
            als.store.delete(run.dir)
        log(f"{outcome.query}: round {k + 1} of {repeat}: " + ", ".join(
            f"{w} {outcome.rounds_s[w][-1]:.1f} s" for w in ["plain", *ways]
        ))


def measure(
    als: LineageSession, name: str, sql: str, sample: int, seed: int, keep: bool, log: Log,
    ways: dict[str, dict[str, Any]] | None = None, repeat: int = 0,
) -> Outcome:
    """One query through every step; the first failure ends it with its status."""
    ways = ways or {w: WAYS[w] for w in ("fm", "eager")}
    names = list(ways)
    outcome = Outcome(name)
    runs: dict[str, Run] = {}
    try:
        outcome.spark_s, answer = step("spark", lambda: [tuple(r) for r in als.sql(sql).collect()])
        expected = multiset(answer)
        outcome.output_rows = len(answer)
        log(f"{name}: Spark gives {len(answer)} row(s) in {outcome.spark_s:.1f} s; running fm")
        rows: list[tuple] = []
        for way, then in zip(names, [*names[1:], None]):
            outcome.task_s[way], runs[way] = step(way, partial(als.run, als.sql(sql), **ways[way]))
            rows = compare_output(way, runs[way], expected)
            outcome.store_bytes[way] = als.store.size(runs[way].dir)
            if then is not None:
                log(f"{name}: {way} run {outcome.task_s[way]:.1f} s; running {then}")
        chosen = random.Random(f"{seed}:{name}").sample(rows, min(sample, len(rows)))
        log(f"{name}: {names[-1]} run {outcome.task_s[names[-1]]:.1f} s; asking {len(chosen)} row(s) of each")
        trace(outcome, runs, runs["fm"].output.columns, chosen)
        if not rows:
            outcome.detail = "no output row: outputs checked, no lineage asked"
        if repeat:
            log(f"{name}: answers agree; timing {repeat} round(s)")
            rounds(als, outcome, sql, ways, repeat, log)
    except Failed as failed:
        outcome.status, outcome.phase = failed.status, failed.phase
        outcome.detail, outcome.error_type = failed.detail, failed.error_type
    finally:
        if not keep:
            for run in runs.values():
                try:
                    als.store.delete(run.dir)
                except Exception as exc:  # a leftover run must not hide the outcome
                    log(f"{name}: could not delete run {run.dir}: {first_line(exc)}")
    return outcome


HEADER = (
    "| query | status | rows | asked | Spark s | fm task s | eager task s "
    "| fm lineage s | eager lineage s | detail |"
)


def seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def table_row(o: Outcome) -> str:
    detail = (f"[{o.phase}] " if o.phase else "") + o.detail
    cells = [
        o.query,
        o.status,
        "—" if o.output_rows is None else str(o.output_rows),
        str(o.sampled),
        seconds(o.spark_s),
        seconds(o.task_s.get("fm")),
        seconds(o.task_s.get("eager")),
        seconds(o.lineage_s.get("fm")),
        seconds(o.lineage_s.get("eager")),
        detail.replace("|", "\\|"),
    ]
    return "| " + " | ".join(cells) + " |"


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def cost_row(o: Outcome, ways: list[str]) -> str:
    """Medians of the rounds: plain Spark's seconds, each way's as a multiple of it; each
    way's question (median over the asked rows), store and the child's peak memory."""
    plain = median(o.rounds_s.get("plain", []))
    cells = [o.query, seconds(plain)]
    for way in ways:
        task = median(o.rounds_s.get(way, []))
        cells.append("—" if task is None or not plain else f"{task / plain:.2f}×")
    cells += [seconds(median(o.question_s.get(way, []))) for way in ways]
    first = o.parts[0] if o.parts else {}
    cells.append(", ".join(f"{t} {a:,}/{b:,}" for t, (a, b) in first.items()) or "—")
    cells += [f"{o.store_bytes[w] / 2**20:.1f}" if w in o.store_bytes else "—" for w in ways]
    cells += [f"{o.peak_mb[k]:,.0f}" if k in o.peak_mb else "—" for k in ("driver", "jvm")]
    return "| " + " | ".join(cells) + " |"


def cost_table(outcomes: list[Outcome], info: dict[str, Any]) -> list[str]:
    ways = info["ways"]
    header = (
        "| query | plain Spark s | "
        + " | ".join(f"{w} task ×" for w in ways) + " | "
        + " | ".join(f"{w} question s" for w in ways)
        + " | eager answer: contributing/control rows | "
        + " | ".join(f"{w} store MiB" for w in ways)
        + " | driver peak MiB | JVM peak MiB |"
    )
    return [
        f"Medians of {info['repeat']} round(s) after the checks (plain Spark and each way alternating); "
        "questions: one asked row each, the answer's own time (median over the asked rows); "
        "peak memory: the query's child process over all of its runs.",
        "",
        header,
        "|---" * header.count(" | ") + "|---|",
        *(cost_row(o, ways) for o in outcomes if o.rounds_s),
        "",
    ]


def markdown(outcomes: list[Outcome], info: dict[str, Any]) -> str:
    counts = Counter(o.status for o in outcomes)
    summary = ", ".join(f"{counts[s]} {s}" for s in ("traced", "disagrees", "refused", "error") if counts[s])
    return "\n".join(
        [
            "# TPC-H as the specification writes it: lineage coverage",
            "",
            f"SF {info['sf']}, {info['sample']} sampled row(s) per query (seed {info['seed']}), "
            f"{info['machine']['cpus']} CPUs, load average before/after "
            f"{info['load_before'][0]:.1f}/{info['load_after'][0]:.1f}, "
            f"{info['wall_s']:.0f} s in all; commit {info['commit']}, engine {info['engine']}. "
            "Queries: `cda_workload/workloads/tpch_queries.py`.",
            "",
            f"**{len(outcomes)} queries: {summary}.** Lineage seconds are summed over the asked rows.",
            "",
            HEADER,
            "|---" * HEADER.count(" | ") + "|---|",
            *(table_row(o) for o in outcomes),
            "",
            *(cost_table(outcomes, info) if info.get("repeat") else []),
        ]
    )


def parse_queries(spec: str) -> list[str]:
    if spec == "all":
        return list(QUERIES)
    names = [n.strip().upper() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in QUERIES]
    if unknown:
        raise SystemExit(f"unknown queries {', '.join(unknown)}: choose from all or {','.join(QUERIES)}")
    return names


def session(data: Path, sf: str, in_place: bool = False) -> LineageSession:
    """A session on this scale factor's store, the TPC-H tables registered once per store or,
    ``in_place``, temp views over the generated files (read where they are, as a user's
    ``spark.read`` would: no copy, which at SF 10 would take longer than the queries)."""
    store = data / f"tpch-{'in-place' if in_place else 'coverage'}-store-sf{sf}"
    als = LineageSession(store=str(store), progress=lambda m: None)
    als.spark.sparkContext.setLogLevel("ERROR")
    files = generate(float(sf), data / f"tpch-sf{sf}")
    if in_place:
        for table in PRIMARY_KEYS:
            als.spark.read.parquet(str(files.resolve() / f"{table}.parquet")).createOrReplaceTempView(table)
    elif not set(PRIMARY_KEYS) <= set(als.store.source_names()):
        register_tpch(als, files)
    return als


def ways_of(args: argparse.Namespace, sql: str = "") -> dict[str, dict[str, Any]]:
    """Each way's ``als.run`` options for ``sql``, by name; in place, the primary keys of the
    tables it reads name their rows (``keys=`` refuses a table the task does not read; a
    name inside a string literal, Q16's ``'%Customer%Complaints%'``, is not a table read)."""
    names = ("fm", "eager", "compressed") if args.compressed else ("fm", "eager")
    code = re.sub(r"'[^']*'", "''", sql)
    read = {t: k for t, k in PRIMARY_KEYS.items() if re.search(rf"\b{t}\b", code, re.IGNORECASE)}
    return {w: {**WAYS[w], **({"keys": read} if args.in_place else {})} for w in names}


def child(args: argparse.Namespace) -> int:
    """``--one Qn --result file``: measures one query, writes its outcome as JSON."""
    progress = Progress(sys.stderr)
    als = session(Path(args.data), args.sf, args.in_place)
    outcome = measure(
        als, args.one, QUERIES[args.one], args.sample, args.seed, args.keep_runs, progress.say,
        ways_of(args, QUERIES[args.one]), args.repeat,
    )
    outcome.peak_mb = peak_mb()
    Path(args.result).write_text(json.dumps(asdict(outcome), default=str))
    return 0


def peak_mb() -> dict[str, float]:
    """This process's peak resident memory and its JVM's (a child named java, Spark's
    driver), in MiB, from the kernel's high-water marks."""
    found = {"driver": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:
            continue
        if fields.get("Name", "").strip() == "java" and fields.get("PPid", "").strip() == str(os.getpid()):
            found["jvm"] = int(fields["VmHWM"].split()[0]) / 1024
    return found


PHASES = (  # a child's last progress line -> the step it died in
    ("timing", "rounds"), ("asking", "lineage"), ("running compressed", "compressed"),
    ("running eager", "eager"), ("Spark gives", "fm"),
)


def isolated(name: str, args: argparse.Namespace, logs: Path) -> Outcome:
    """Runs ``name`` in a child process; its progress lines are echoed, all its output logged.
    A child that dies or runs past ``--timeout`` gives an ``error`` naming the cause."""
    command = [
        sys.executable, "-m", "cda_workload.benchmarks.tpch_coverage", "--one", name, "--sf", args.sf,
        "--sample", str(args.sample), "--seed", str(args.seed), "--data", args.data,
        "--repeat", str(args.repeat), *(["--compressed"] if args.compressed else []),
        *(["--in-place"] if args.in_place else []),
    ]  # fmt: skip
    log_file = logs / f"{name}.log"
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, log_file.open("w") as sink:
        result = Path(tmp) / "outcome.json"
        command += ["--result", str(result), *(["--keep-runs"] if args.keep_runs else [])]
        proc = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.PIPE, text=True, start_new_session=True
        )

        def pump() -> None:  # the child's stderr: all to its log, progress lines echoed
            assert proc.stderr is not None
            for line in proc.stderr:
                sink.write(line)
                lines.append(line)
                if re.match(r"\[\d\d:\d\d:\d\d\] ", line):
                    sys.stderr.write(line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            rc: int | None = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the child and its Spark driver, one process group
            proc.wait()
            rc = None
        reader.join(timeout=30)
        if result.exists():
            return Outcome(**json.loads(result.read_text()))
    seen = "".join(lines)
    if rc is None:
        why = f"timed out after {args.timeout} s"
    elif "java.lang.OutOfMemoryError" in seen:
        why = "the Spark driver died: java.lang.OutOfMemoryError: Java heap space"
    else:
        last = next((x.strip() for x in reversed(lines) if x.strip()), "")
        why = f"the child exited with {rc}: {last[:300]}"
    phase = next((step_ for marker, step_ in PHASES if re.search(f"{name}: .*{marker}", seen)), "spark")
    return Outcome(name, "error", f"{why} (log: {log_file})", phase, "ChildDied")


def commit() -> str:
    """HEAD of the checkout, ``+dirty`` when the engine's folders differ from it."""
    git = ["git", "-C", str(Path(__file__).resolve().parents[2])]
    try:
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "segmenter", "tracing", "materialization"],
            capture_output=True,
            text=True,
        ).stdout
    except OSError:
        return "unknown"
    return head.strip() + ("+dirty" if dirty.strip() else "")


def write(out: Path, outcomes: list[Outcome], info: dict[str, Any]) -> None:
    (out / "tpch_coverage.json").write_text(
        json.dumps({**info, "outcomes": [asdict(o) for o in outcomes]}, indent=2, default=str)
    )
    (out / "tpch_coverage.md").write_text(markdown(outcomes, info))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cda_workload.benchmarks.tpch_coverage",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--sf", default="0.01", help="TPC-H scale factor (default 0.01)")
    parser.add_argument("--queries", default="all", help="all, or a comma list such as Q1,Q13")
    parser.add_argument("--sample", type=int, default=3, help="output rows asked per query (default 3)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--data", default="bench_data", help="generated data and the results store")
    parser.add_argument("--out", default="tpch_coverage", help="output folder (default ./tpch_coverage)")
    parser.add_argument("--keep-runs", action="store_true", help="keep the runs in the store (else deleted)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per query (default 900)")
    parser.add_argument("--in-process", action="store_true", help="all queries in this process's Spark")
    parser.add_argument(
        "--repeat", type=int, default=0,
        help="after the checks, rounds of plain Spark and each way, alternating (default 0: none)",
    )
    parser.add_argument("--compressed", action="store_true", help="also the compressed backend")
    parser.add_argument(
        "--in-place", action="store_true",
        help="read the generated files in place (temp views, keys= the primary keys), not registered copies",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child: this query only
    parser.add_argument("--result", help=argparse.SUPPRESS)  # where a child writes its outcome
    args = parser.parse_args(argv)
    if args.one:
        return child(args)
    names = parse_queries(args.queries)
    out, data = Path(args.out), Path(args.data)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    progress = Progress(sys.stderr)
    started = time.perf_counter()
    with progress.working(f"TPC-H SF {args.sf}: generating the tables (or reusing them)"):
        generate(float(args.sf), data / f"tpch-sf{args.sf}")
    als = session(data, args.sf, args.in_place) if args.in_process else None
    info: dict[str, Any] = {
        "sf": float(args.sf),
        "sample": args.sample,
        "seed": args.seed,
        "isolation": "in-process" if args.in_process else "a child process per query",
        "commit": commit(),
        "engine": engine_fingerprint(),  # the engine's source as run (the checkout may be edited)
        "machine": machine(),
        "load_before": os.getloadavg(),
        "ways": list(ways_of(args)),
        "sources": "read in place (temp views over the files)" if args.in_place else "registered copies",
        "spark": {k: os.environ[k] for k in ("AL_SHUFFLE_PARTITIONS", "AL_DRIVER_MEMORY") if k in os.environ},
        "repeat": args.repeat,
    }
    outcomes: list[Outcome] = []
    print(HEADER + "\n" + "|---" * HEADER.count(" | ") + "|---|", flush=True)
    for name in names:
        if als is not None:
            outcome = measure(
                als, name, QUERIES[name], args.sample, args.seed, args.keep_runs, progress.say,
                ways_of(args, QUERIES[name]), args.repeat,
            )
        else:
            outcome = isolated(name, args, out / "logs")
        outcomes.append(outcome)
        print(table_row(outcome), flush=True)
        info.update(load_after=os.getloadavg(), wall_s=time.perf_counter() - started)
        write(out, outcomes, info)
    counts = Counter(o.status for o in outcomes)
    progress.say(
        f"{len(outcomes)} queries in {time.perf_counter() - started:.0f} s: "
        + ", ".join(f"{n} {s}" for s, n in counts.items())
        + f"; wrote {out / 'tpch_coverage.json'} and {out / 'tpch_coverage.md'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

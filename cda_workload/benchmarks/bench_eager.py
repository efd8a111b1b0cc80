"""Eager-lineage benchmark: what capturing lineage while the task runs costs, and what it buys.

    python -m cda_workload.benchmarks.bench_eager --sf 0.1,1 --queries Q1,Q3,Q10,Q12 \\
        --repeat 5 --out bench_eager

Per scale factor and query it measures

1. capture overhead: the task time of an eager run (``record["task_seconds"]``: the task with
   its capture, tags or only lineage ids where the lineage is derived, output written;
   ``record["seconds"]``: plus the index build) against a lazy run storing nothing but its
   output (strategy ``rerun``), and, for tasks of several segments,
   also against ``full`` (which stores the same intermediates as eager). Baseline and eager runs
   alternate in one loop, so a burst of load hits both; overhead ratios are per pair;
2. backward lineage latency for 1 and for 100 output rows (all of them when the output is
   smaller), eager (from the indexes) and lazy (tracing queries on the same run), the answer
   collected (``to_dict()``) inside the timed block; rows are drawn up front with a seeded random;
3. forward lineage latency for 1 random row of the biggest source table the query reads, and for
   about 1 % of it (``<first key column> % 100 = i``);
4. index size: ``run.index_bytes`` per output row and per row of the captured source tables.

Queries: TPC-H Q1, Q3, Q10, Q12 (standard text, validation parameters, Q1's date interval
folded into a literal) on plain TPC-H data, and CDA queries as ``cda:Q2,cda:Q20`` on the
extended database with the real models. The CDA queries call YOLO (~125 ms per image) and a
sentiment transformer on every candidate row: only SF 0.01 is feasible on a small machine.

Generated data and the results store go under ``--data`` (git-ignored), figures under
``--out``: ``bench_eager.json`` (every repetition, with ``os.getloadavg()`` before and after
each measurement, as the machine may be shared) and ``bench_eager.md`` (tables).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import statistics
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cda_workload.benchmarks.bench import Case, interleaved, machine, prepare, timed
from cda_workload.workloads.cda_queries import QUERIES as CDA_QUERIES
from cda_workload.workloads.tpch import PRIMARY_KEYS, generate, register_tpch
from materialization.store import SOURCE_META
from segmenter.errors import LineageError
from segmenter.operators import Source
from segmenter.segments import segment
from tracing import LineageSession, Run

TPCH_QUERIES: dict[str, str] = {
    "Q1": """
SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
       avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc,
       count(*) AS count_order
FROM lineitem
WHERE l_shipdate <= DATE '1998-09-02'
GROUP BY l_returnflag, l_linestatus
ORDER BY l_returnflag, l_linestatus
""",
    "Q3": """
SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate, o_shippriority
FROM customer, orders, lineitem
WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
  AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'
GROUP BY l_orderkey, o_orderdate, o_shippriority
ORDER BY revenue DESC, o_orderdate
LIMIT 10
""",
    "Q10": """
SELECT c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) AS revenue, c_acctbal, n_name,
       c_address, c_phone, c_comment
FROM customer, orders, lineitem, nation
WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey
  AND o_orderdate >= DATE '1993-10-01' AND o_orderdate < DATE '1994-01-01'
  AND l_returnflag = 'R' AND c_nationkey = n_nationkey
GROUP BY c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment
ORDER BY revenue DESC
LIMIT 20
""",
    # Q13 as written: the LEFT OUTER JOIN is (customer ⋈ orders) ∪ padded (customer ▷ orders)
    "Q13": """
SELECT c_count, count(*) AS custdist
FROM (SELECT c_custkey, count(o_orderkey) AS c_count
      FROM customer LEFT OUTER JOIN orders
        ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%'
      GROUP BY c_custkey) c_orders
GROUP BY c_count
ORDER BY custdist DESC, c_count DESC
""",
    # Q13 with an inner join (customers without orders drop out), as the earlier benchmarks
    # ran it: an aggregation over an aggregation, two segments, lineage paths of two steps
    "Q13INNER": """
SELECT c_count, count(*) AS custdist
FROM (SELECT c_custkey, count(o_orderkey) AS c_count
      FROM customer JOIN orders
        ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%'
      GROUP BY c_custkey) c_orders
GROUP BY c_count
ORDER BY custdist DESC, c_count DESC
""",
    "Q12": """
SELECT l_shipmode,
       sum(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH' THEN 1 ELSE 0 END)
         AS high_line_count,
       sum(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH' THEN 1 ELSE 0 END)
         AS low_line_count
FROM orders, lineitem
WHERE o_orderkey = l_orderkey AND l_shipmode IN ('MAIL', 'SHIP')
  AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate
  AND l_receiptdate >= DATE '1994-01-01' AND l_receiptdate < DATE '1995-01-01'
GROUP BY l_shipmode
ORDER BY l_shipmode
""",
}

Log = Callable[[str], None]


def engine_fingerprint() -> str:
    """A hash of the engine's source as imported now: the engine changes while benchmarks run,
    and ``--keep`` can merge records of different invocations."""
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for path in sorted(
        p for d in ("segmenter", "materialization", "tracing") for p in (root / d).glob("*.py")
    ):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


ENGINE = engine_fingerprint()


def cases(scale_factors: list[float], spec: str) -> list[Case]:
    """``Q1,Q3`` (TPC-H) and ``cda:Q2`` (CDA) names → cases, grouped by scale factor and
    workload so that each database is registered once."""
    out = []
    for name in (n.strip() for n in spec.split(",") if n.strip()):
        workload, query = (
            ("cda", name[4:].upper()) if name.lower().startswith("cda:") else ("tpch", name.upper())
        )
        queries = CDA_QUERIES if workload == "cda" else TPCH_QUERIES
        if query not in queries:
            raise ValueError(f"unknown {workload} query {query!r}; choose from {', '.join(queries)}")
        out += [Case(workload, query, str(sf), queries[query]) for sf in scale_factors]
    return sorted(out, key=lambda c: (float(c.scale), c.workload))


def p95(values: list[float]) -> float:
    """The nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def summary(seconds: list[float]) -> dict[str, Any]:
    return {
        "seconds": seconds,
        "n": len(seconds),
        "median_s": statistics.median(seconds) if seconds else None,
        "p95_s": p95(seconds) if seconds else None,
    }


class Bench:
    """Measurements of one case, as records; the session and options are shared by all cases."""

    def __init__(self, als: LineageSession, args: argparse.Namespace, log: Log) -> None:
        self.als = als
        self.args = args
        self.log = log

    def record(self, case: Case, measure: str, variant: str, load: tuple[float, ...], **extra: Any) -> dict:
        return {
            "workload": case.workload,
            "query": case.query,
            "sf": float(case.scale),
            "measure": measure,
            "variant": variant,
            "loadavg_before": list(load),
            "loadavg_after": list(os.getloadavg()),
            "engine": ENGINE,
            **extra,
        }

    def drop(self, run: Run) -> None:
        """Runs are kept only while asked: SF 1 indexes would fill the disk over the repetitions."""
        self.als.store.delete(run.dir)

    def measure(self, case: Case) -> Iterator[dict]:
        label = f"{case.workload} {case.query} @SF{case.scale}"
        run = yield from self.overhead(case, label)
        try:
            yield from self.backward(case, label, run)
            yield from self.forward(case, label, run)
            yield self.sizes(case, label, run)
        finally:
            self.drop(run)

    # --- 1. capture overhead ------------------------------------------------------------------
    def overhead(self, case: Case, label: str) -> Iterator[dict]:
        load = os.getloadavg()
        kinds: dict[str, list[dict[str, float]]] = {}
        eager: Run | None = None
        several = len(list(segment(self.als.parse(case.sql).root).walk())) > 1
        baselines = ["rerun", "full"] if several else ["rerun"]  # eager stores intermediates as full does
        warmup = self.args.warmup
        for i, kind in interleaved([*baselines, "eager"], self.args.repeat, warmup):
            if kind == "eager":
                wall, run = timed(lambda: self.als.run(case.sql, backend="eager"))
            else:
                wall, run = timed(lambda k=kind: self.als.run(case.sql, strategy=k))
            rec = run.record
            if i >= 0:  # a warm-up pair is not counted
                kinds.setdefault(kind, []).append(
                    {"task_s": rec["task_seconds"], "total_s": rec["seconds"], "wall_s": wall}
                    | ({"index_s": rec["capture"]["index_seconds"]} if kind == "eager" else {})
                )
            shown = f"{i + 1}/{self.args.repeat}" if i >= 0 else "warm-up"
            self.log(
                f"{label}: run {shown} {kind:5s} task {rec['task_seconds']:.2f} s, "
                f"total {rec['seconds']:.2f} s, {rec['output']['rows']} output rows"
            )
            if kind == "eager" and i == self.args.repeat - 1:
                eager = run
            else:
                self.drop(run)
        assert eager is not None
        pairs = {}
        for base in baselines:
            base_s = [r["task_s"] for r in kinds[base]]
            pairs[base] = {
                fig: [100 * (e[fig] / b - 1) for e, b in zip(kinds["eager"], base_s)]
                for fig in ("task_s", "total_s")
            }
            over = pairs[base]
            self.log(
                f"{label}: eager vs {base}: task overhead median {statistics.median(over['task_s']):+.1f} % "
                f"(worst {max(over['task_s']):+.1f} %), incl. index build median "
                f"{statistics.median(over['total_s']):+.1f} % (worst {max(over['total_s']):+.1f} %)"
            )
        yield self.record(
            case,
            "overhead",
            "task",
            load,
            repeat=self.args.repeat,
            warmup=warmup,
            runs=kinds,
            overhead_pct=pairs,
            output_rows=eager.record["output"]["rows"],
            segments=len(list(eager.root.walk())),
            medians={k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in kinds.items()},
        )
        return eager

    # --- 2. backward --------------------------------------------------------------------------
    def repeated(self, questions: list[Any], ask: Callable[[Any], Any]) -> tuple[list[float], list[Any]]:
        """Time ``ask`` on each question in turn; stop early once ``--budget`` seconds are spent
        and 3 timings are in (a Q1 answer at SF 1 takes minutes to collect)."""
        seconds, answers = [], []
        for q in questions:
            spent, answer = timed(lambda q=q: ask(q))
            seconds.append(spent)
            answers.append(answer)
            if sum(seconds) > self.args.budget and len(seconds) >= 3:
                break
        return seconds, answers

    def backward(self, case: Case, label: str, run: Run) -> Iterator[dict]:
        output = [r.asDict() for r in run.output.collect()]
        rng = random.Random(self.args.seed)
        for size in (1, 100):
            n = min(size, len(output))
            draws = [rng.sample(output, n) for _ in range(self.args.lookups)]
            # untimed probe (index lookups only, nothing collected): answers of millions of rows
            # would take many minutes each to collect, and may not fit in the driver
            answer_rows = sum(_count(rows) for rows in run.lineage(rows=draws[0]).source.values())
            for backend, reps in (("eager", self.args.lookups), ("lazy", self.args.lazy_repeat)):
                load = os.getloadavg()
                if answer_rows > self.args.max_answer_rows:
                    reason = f"the lineage of {n} row(s) has {answer_rows} source rows > --max-answer-rows"
                    self.log(f"{label}: backward {n} row(s) {backend} skipped: {reason}")
                    yield self.record(case, "backward", backend, load, al_size=size, rows=n, skipped=reason)
                    continue

                def ask(rows: list[dict], b: str = backend) -> tuple[float, dict[str, int]]:
                    """The answer made Python values as JSON lists them, and its rows per table;
                    beyond what JSON lists, counted in Arrow (CDA Q21 at SF 0.1, all 47 rows:
                    2.2 M rows listed row by row, 21 GB when they were made dicts)."""
                    lin = run.lineage(rows=rows, backend=b)
                    try:
                        data = lin.to_dict()
                    except LineageError:
                        return lin.seconds, {t: sum(lin.part_counts(t)) for t in lin.tables}
                    return lin.seconds, {t: len(v) for t, v in data["source_lineage"].items()}

                seconds, answers = self.repeated(draws[:reps], ask)
                found = [a for _, a in answers]
                rec = self.record(
                    case,
                    "backward",
                    backend,
                    load,
                    al_size=size,
                    rows=n,
                    source_rows_found=found,
                    engine_seconds=[e for e, _ in answers],  # the answer's own timing, before collecting
                    **summary(seconds),
                )
                self.log(
                    f"{label}: backward {n} row(s) {backend:5s} median {rec['median_s'] * 1000:.0f} ms, "
                    f"p95 {rec['p95_s'] * 1000:.0f} ms over {len(seconds)}; lineage {found[0]}"
                )
                yield rec

    # --- 3. forward ---------------------------------------------------------------------------
    def forward(self, case: Case, label: str, run: Run) -> Iterator[dict]:
        table = max(self.sources(run), key=lambda t: self.source_rows(t))
        key = PRIMARY_KEYS[table]
        df = self.als.table(table).select(*key)
        picked = df.orderBy(F.xxhash64(F.lit(self.args.seed), *key)).limit(self.args.lookups).collect()
        moduli = random.Random(self.args.seed).sample(range(100), self.args.lookups)
        asks = {
            "1 row": [{"ids": [tuple(r)]} for r in picked],
            "1 %": [{"where": f"{key[0]} % 100 = {m}"} for m in moduli],
        }
        for variant, questions in asks.items():
            load = os.getloadavg()
            seconds, answers = self.repeated(questions, lambda q: run.forward(table=table, **q).to_dict())
            found = [(len(a["given"]), len(a["outputs"])) for a in answers]
            rec = self.record(
                case, "forward", variant, load, table=table, given_outputs=found, **summary(seconds)
            )
            hits = sum(1 for _, o in found if o)
            self.log(
                f"{label}: forward {variant} of {table} median {rec['median_s'] * 1000:.0f} ms, "
                f"p95 {rec['p95_s'] * 1000:.0f} ms over {len(seconds)}; {hits} found outputs, "
                f"given rows e.g. {found[0][0]}"
            )
            yield rec

    # --- 4. index size ------------------------------------------------------------------------
    def sizes(self, case: Case, label: str, run: Run) -> dict:
        captured = sorted(run.record["capture"]["plan"])
        source_rows = sum(self.source_rows(t) for t in captured)
        out_rows = run.record["output"]["rows"]
        rec = self.record(
            case,
            "index",
            "bytes",
            os.getloadavg(),
            index_bytes=run.index_bytes,
            output_rows=out_rows,
            captured_tables=captured,
            source_rows=source_rows,
            bytes_per_output_row=run.index_bytes / out_rows if out_rows else None,
            bytes_per_source_row=run.index_bytes / source_rows if source_rows else None,
            index_seconds=run.record["capture"]["index_seconds"],
        )
        per_out, per_src = rec["bytes_per_output_row"] or 0, rec["bytes_per_source_row"] or 0
        self.log(
            f"{label}: index {run.index_bytes} bytes = {per_out:.0f} B per output row, "
            f"{per_src:.2f} B per source row ({source_rows} rows of {captured})"
        )
        return rec

    @staticmethod
    def sources(run: Run) -> list[str]:
        return sorted({n.table for n in run.task.root.walk() if isinstance(n, Source)})

    def source_rows(self, table: str) -> int:
        """Counted once, when the snapshot was registered."""
        ref = self.als.store.current_source(table)
        return int(self.als.store.read_record(f"{ref.snapshot}/{SOURCE_META}")["rows"])


def _count(rows: pa.Table | DataFrame) -> int:
    return rows.num_rows if isinstance(rows, pa.Table) else rows.count()


def register(als: LineageSession, case: Case, data: Path, seed: int) -> None:
    """Register the database ``case`` reads: plain TPC-H, or the extended one with the models."""
    if case.workload == "cda":
        prepare(als, case, data, seed)
    else:
        register_tpch(als, generate(float(case.scale), data / f"tpch-sf{case.scale}"))


# --- report -----------------------------------------------------------------------------------
def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x * 1000:.0f}"


def _pct(values: list[float]) -> str:
    return f"{statistics.median(values):+.1f} % / {max(values):+.1f} %"


def _load(rec: dict) -> str:
    return f"{rec['loadavg_before'][0]:.1f}→{rec['loadavg_after'][0]:.1f}"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    return lines + ["| " + " | ".join(str(x) for x in row) + " |" for row in rows] + [""]


def _find(group: list[dict], name: str, measure: str, variant: str, size: int | None = None) -> dict | None:
    return next(
        (
            r
            for r in group
            if (f"{r['workload']}:{r['query']}", r["measure"], r["variant"]) == (name, measure, variant)
            and r.get("al_size") == size
        ),
        None,
    )


def markdown(records: list[dict], info: dict[str, Any]) -> str:
    lines = [
        "# Eager lineage benchmark",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in info.items()),
        "",
    ]
    lines += [
        "The machine is shared: the `load` columns give the 1-minute load average before→after each",
        "measurement (`bench_eager.json` has every repetition and all three load averages).",
        "",
    ]
    for sf in sorted({r["sf"] for r in records}):
        group = [r for r in records if r["sf"] == sf]
        names = list(dict.fromkeys(f"{r['workload']}:{r['query']}" for r in group))
        rows: list[list[Any]] = []
        for name in names:
            rec = _find(group, name, "overhead", "task")
            if rec is None:
                continue
            med, eager = rec["medians"], rec["medians"]["eager"]
            for base, over in rec["overhead_pct"].items():
                rows.append(
                    [name, rec["output_rows"], rec["segments"], base, f"{med[base]['task_s']:.2f}"]
                    + [f"{eager['task_s']:.2f}", f"{eager['total_s']:.2f}", f"{eager['index_s']:.2f}"]
                    + [_pct(over["task_s"]), _pct(over["total_s"]), _load(rec)]
                )
        lines += [f"## SF {sf}", "", "### Capture overhead (task time, medians of the repetitions, s)", ""]
        lines += [
            "Overhead per interleaved pair (after the warm-up pairs, which are not counted; which",
            "of the two runs first alternates): eager / baseline − 1, median / worst; `task` = eager",
            "task time with its capture, `+index` = including the index build (and the derivation",
            "of the lineage where the task carried no tags).",
            "",
        ]
        header = ["query", "out rows", "segs", "baseline", "baseline s", "eager task s", "eager total s"]
        lines += _table([*header, "index s", "overhead task", "overhead +index", "load"], rows)

        rows = []
        for name in names:
            for size in (1, 100):
                e, lz = (
                    _find(group, name, "backward", "eager", size),
                    _find(group, name, "backward", "lazy", size),
                )
                if e is None:
                    continue
                if "skipped" in e:
                    rows.append([name, e["rows"], f"skipped: {e['skipped']}", *["—"] * 7, _load(e)])
                    continue
                lazy = [_ms(lz["median_s"]), _ms(lz["p95_s"]), lz["n"]] if lz else ["—"] * 3
                ratio = f"{lz['median_s'] / e['median_s']:.0f}×" if lz and e["median_s"] else "—"
                rows.append(
                    [name, e["rows"], _ms(e["median_s"]), _ms(e["p95_s"]), e["n"], *lazy, ratio, _load(e)]
                )
        lines += ["### Backward lineage latency (ms)", ""]
        header = ["query", "rows", "eager median", "eager p95", "n", "lazy median", "lazy p95", "n"]
        lines += _table([*header, "lazy / eager", "load"], rows)

        rows = []
        for name in names:
            one, pct = _find(group, name, "forward", "1 row"), _find(group, name, "forward", "1 %")
            if one is None or pct is None:
                continue
            hits = f"{sum(1 for _, o in one['given_outputs'] if o)}/{one['n']}"
            given = statistics.median(g for g, _ in pct["given_outputs"])
            rows.append(
                [name, one["table"], _ms(one["median_s"]), _ms(one["p95_s"]), hits]
                + [_ms(pct["median_s"]), _ms(pct["p95_s"]), f"{given:.0f}", _load(one)]
            )
        lines += ["### Forward lineage latency (ms)", ""]
        header = ["query", "table", "1 row median", "1 row p95", "hits", "1 % median", "1 % p95"]
        lines += _table([*header, "rows given (1 %)", "load"], rows)

        rows = []
        for name in names:
            rec = _find(group, name, "index", "bytes")
            if rec is not None:
                rows.append(
                    [name, rec["index_bytes"], rec["output_rows"], f"{rec['bytes_per_output_row']:.0f}"]
                    + [
                        ", ".join(rec["captured_tables"]),
                        rec["source_rows"],
                        f"{rec['bytes_per_source_row']:.2f}",
                    ]
                )
        lines += ["### Index size", ""]
        header = ["query", "index bytes", "output rows", "B / output row", "captured tables", "source rows"]
        lines += _table([*header, "B / source row"], rows)

        errors = [r for r in group if r["measure"] == "error"]
        if errors:
            lines += ["### Errors", ""]
            lines += [f"- {r['workload']}:{r['query']}: `{r['error']}`" for r in errors] + [""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cda_workload.benchmarks.bench_eager",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--sf", default="0.1,1", help="TPC-H scale factors, comma-separated (default 0.1,1)")
    parser.add_argument(
        "--queries",
        default="Q1,Q3,Q10,Q12",
        help="TPC-H queries (Q1,Q3,Q10,Q12) and CDA queries as cda:Q2,cda:Q20 (real models: "
        "YOLO ~125 ms per image, so only SF 0.01 is feasible for them); default Q1,Q3,Q10,Q12",
    )
    parser.add_argument(
        "--repeat", type=int, default=5, help="baseline/eager run pairs per query (default 5)"
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="baseline/eager pairs run first and not counted: the first runs of a query shape "
        "compile its code (default 1)",
    )
    parser.add_argument(
        "--lookups", type=int, default=20, help="eager lineage questions per figure (default 20)"
    )
    parser.add_argument(
        "--lazy-repeat", type=int, default=5, help="lazy lineage questions per figure (default 5)"
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=120,
        help="seconds per latency figure after which it stops at 3 (default 120)",
    )
    parser.add_argument(
        "--max-answer-rows",
        type=int,
        default=1_000_000,
        help="skip backward figures with more source rows in the answer (default 1e6; Q1 SF1: 1.5e6 a row)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep records of other cases already in OUT/bench_eager.json"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of data generation and row choice")
    parser.add_argument(
        "--out", default="bench_eager", help="figures: bench_eager.json and .md (default ./bench_eager)"
    )
    parser.add_argument(
        "--data",
        default="al_data/bench_eager",
        help="generated data and results store (default ./al_data/bench_eager)",
    )
    args = parser.parse_args(argv)
    out, data = Path(args.out), Path(args.data)
    out.mkdir(parents=True, exist_ok=True)
    todo = cases([float(s) for s in args.sf.split(",") if s.strip()], args.queries)

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    als = LineageSession(store=str(data / "store"))
    als.spark.sparkContext.setLogLevel("ERROR")
    info = {**machine(), "spark_master": als.spark.sparkContext.master, "engine": ENGINE}
    bench = Bench(als, args, log)
    records: list[dict] = []
    if args.keep and (out / "bench_eager.json").exists():
        measured = {(c.workload, c.query, float(c.scale)) for c in todo}
        kept = json.loads((out / "bench_eager.json").read_text())["records"]
        records = [r for r in kept if (r["workload"], r["query"], r["sf"]) not in measured]
    registered = None
    for case in todo:
        if registered != (case.workload, case.scale):
            log(f"generating and registering {case.workload} data at SF {case.scale}")
            register(als, case, data, args.seed)
            registered = (case.workload, case.scale)
        try:
            for rec in bench.measure(case):
                records.append(rec)
        except Exception as exc:
            log(f"{case.workload} {case.query} @SF{case.scale} FAILED: {type(exc).__name__}: {exc}")
            records.append(
                bench.record(
                    case,
                    "error",
                    type(exc).__name__,
                    os.getloadavg(),
                    error=f"{type(exc).__name__}: {exc}",
                    traceback=traceback.format_exc(),
                )
            )
        (out / "bench_eager.json").write_text(
            json.dumps({"machine": info, "records": records}, indent=2, default=str)
        )
        (out / "bench_eager.md").write_text(markdown(records, info))
    log(f"wrote {out / 'bench_eager.json'} and {out / 'bench_eager.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

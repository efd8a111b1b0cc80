"""The workload commands: ``demo`` (CDA queries with real models, explained rows, audit
reports), ``bench`` (section 7's measurements) and ``queries`` (the CDA queries' segments)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from cda_workload.command_line.local_session import open_session
from cda_workload.command_line.progress import Progress

DEMO_QUERIES = ("Q2", "Q3", "Q20")


def demo(args: argparse.Namespace, progress: Progress) -> None:
    """Generate SF 0.01, run a few CDA queries under FM, explain some output rows."""
    import mlflow

    from cda_workload.benchmarks.bench import Case, prepare
    from cda_workload.command_line.tracking import tracked_run
    from cda_workload.workloads.cda_queries import QUERIES
    from cda_workload.workloads.udfs import model_checksums
    from tracing.present.report import audit_report, write_text
    from tracing.tracking import log_answer

    als = open_session(args.store, progress, args.verbose)
    als.scale_factor = args.sf  # each run logs itself into the demo's MLflow run
    data = Path(args.data)
    with tracked_run("cda-demo", f"demo-sf{args.sf}", args.mlflow_dir) as tracked:
        params = {"strategy": args.strategy, "scale_factor": args.sf, "seed": args.seed}  # as each query's
        mlflow.log_params(params | model_checksums())
        cases = [Case("cda", name, str(args.sf), QUERIES[name]) for name in DEMO_QUERIES]
        with progress.working(
            f"preparing the extended TPC-H database (SF {args.sf}, seed {args.seed}) in {data}"
        ):
            prepare(als, cases[0], data, args.seed)
        for name, case in zip(DEMO_QUERIES, cases):
            started = time.perf_counter()
            with progress.working(
                f"{name}: running under {args.strategy} (models run on every candidate row)"
            ):
                run = als.run(case.sql, strategy=args.strategy, name=name)  # the report shows the SQL
            task_s = time.perf_counter() - started
            rows = run.output.count()
            print(f"\n{name}: {rows} output rows in {task_s:.1f} s; stored {run.stored_tuples} tuples")
            print(run.segments())
            run.output.show(5, truncate=40)
            if rows == 0:
                continue
            started = time.perf_counter()
            with progress.working(f"{name}: deriving the augmented lineage of one output row"):
                lineage = run.lineage(sample=1, seed=args.seed)
            derive_s = time.perf_counter() - started
            print(lineage)
            out = Path(args.store) / f"lineage-{name}-{run.id}.json"
            out.write_text(lineage.to_json())
            html = audit_report(run, [lineage], run.models)
            report = write_text(html, Path(args.store) / f"report-{name}-{run.id}.html")
            logged = run.mlflow_run  # the query's nested run: its answer and report go there
            if logged is not None:
                client = mlflow.MlflowClient()
                client.set_tag(logged, "al.query", name)
                client.log_metric(logged, "derive_seconds", derive_s)
                log_answer(lineage, logged, "sample-1")  # where lin.log() and al lineage --mlflow put theirs
                client.log_artifact(logged, str(report), "audit")
        print(f"\nruns are in the results store {als.store.uri}; lineage JSON and audit reports beside them")
        print(f"MLflow run {tracked.info.run_id} in {mlflow.get_tracking_uri()} (experiment cda-demo)")
        print(f"ask again later: al lineage <run id> --store {args.store} --sample 1")


def bench(args: argparse.Namespace, progress: Progress) -> None:
    import mlflow

    from cda_workload.benchmarks.bench import cda_cases, lfw_cases, machine, measure, prepare
    from cda_workload.benchmarks.bench_report import write_report
    from cda_workload.command_line.tracking import log_records, tracked_run
    from cda_workload.workloads.udfs import model_checksums

    strategies = _list(args.strategies, str)
    unknown = sorted(set(strategies) - {"rerun", "fm", "full"})
    if unknown:
        raise ValueError(f"unknown strategies {unknown}; choose from rerun, fm, full")
    al_sizes = _list(args.al_size, int)
    if args.workload == "cda":
        cases = cda_cases(_list(args.sf, float), args.queries)
    else:
        cases = lfw_cases(_list(args.sizes, str), _list(args.recognizers, str))
    out = Path(args.out)
    als = open_session(str(out / "store"), progress, args.verbose)
    als.mlflow = False  # timed runs must not log themselves; the medians are logged in batches
    records: list[dict] = []
    with tracked_run(f"{args.workload}-bench", out.name, args.mlflow_dir):
        mlflow.log_params(
            {
                "workload": args.workload,
                "strategies": args.strategies,
                "al_sizes": args.al_size,
                "repeat": args.repeat,
                "scales": args.sf if args.workload == "cda" else args.sizes,
                **model_checksums(),
                **{f"machine.{k}": v for k, v in machine().items()},
            }
        )
        for i, case in enumerate(cases, 1):
            progress.say(f"[{i}/{len(cases)}] {case.workload} {case.query} at {case.scale}")
            prepare(als, case, Path(args.data), args.seed)
            new = list(measure(als, case, strategies, al_sizes, args.repeat, progress.say))
            records += new
            log_records(new)
            write_report(records, out, machine())  # partial results survive an interruption
        for path in write_report(records, out, machine()):
            mlflow.log_artifact(str(path))
    progress.say(f"wrote {out / 'bench.json'}, {out / 'bench.md'} and plots")


def queries(args: argparse.Namespace, progress: Progress) -> None:
    """Table 3's analogue: each CDA query's segments, which are D, where the φ operators sit
    (``--as-written``: of the query as the TPC-H specification writes it, subqueries kept)."""
    from cda_workload.benchmarks.bench import cda_cases, prepare
    from cda_workload.workloads.cda_queries import AS_WRITTEN
    from segmenter.segments import render_segments, segment

    als = open_session(args.store, progress, args.verbose)
    prepared: set[tuple[str, str]] = set()
    for case in cda_cases([args.sf], args.queries):
        if (case.workload, case.scale) not in prepared:  # one snapshot per table, not per query
            prepare(als, case, Path(args.data), args.seed)
            prepared.add((case.workload, case.scale))
        task = als.parse(als.sql(AS_WRITTEN[case.query] if args.as_written else case.sql))
        print(f"\n{case.query}{' as written' if args.as_written else ''}")
        print(render_segments(segment(task.root)))


def _list(text: str, kind: type) -> list:
    try:
        return [kind(x.strip()) for x in str(text).split(",") if x.strip()]
    except ValueError as exc:
        raise ValueError(f"cannot read {text!r} as a comma-separated list of {kind.__name__}") from exc


def add_workload_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``demo``, ``bench`` and ``queries`` with their options."""
    data = argparse.ArgumentParser(add_help=False)
    data.add_argument("--data", default="al_data", help="where generated databases go (default ./al_data)")
    data.add_argument("--seed", type=int, default=0, help="seed for data generation and row sampling")
    data.add_argument(
        "--mlflow-dir",
        help="local MLflow folder (sqlite + artifacts; default ./al_mlflow, or $MLFLOW_TRACKING_URI)",
    )
    parents = [common, data]

    p = sub.add_parser(
        "demo", parents=parents, help="run CDA queries at SF 0.01 with real models and explain output rows"
    )
    p.add_argument("--sf", type=float, default=0.01, help="TPC-H scale factor (default 0.01)")
    p.add_argument("--store", default="al_store", help="results store (default ./al_store)")
    p.add_argument("--strategy", default="fm", choices=["rerun", "full", "fm"])
    p.set_defaults(func=demo)

    p = sub.add_parser("bench", parents=parents, help="measure task and derivation times (section 7)")
    p.add_argument("--workload", default="cda", choices=["cda", "lfw"])
    p.add_argument("--sf", default="0.01", help="CDA scale factors, comma-separated (default 0.01)")
    p.add_argument("--queries", default="all", help="CDA queries, e.g. Q3,Q9, or all (default)")
    p.add_argument(
        "--sizes", default="small,medium", help="LFW sizes: small,medium,large (default small,medium)"
    )
    p.add_argument(
        "--recognizers", default="face_recognition,name_from_path", help="LFW UDFs (default: both)"
    )
    p.add_argument("--strategies", default="rerun,fm,full", help="default rerun,fm,full")
    p.add_argument("--al-size", default="1,100", help="output rows per derivation (default 1,100)")
    p.add_argument("--repeat", type=int, default=5, help="repetitions per measurement (default 5)")
    p.add_argument("--out", default="bench_out", help="output folder (default ./bench_out)")
    p.set_defaults(func=bench)

    p = sub.add_parser("queries", parents=parents, help="print the segments of each CDA query (Table 3)")
    p.add_argument("--sf", type=float, default=0.01)
    p.add_argument("--queries", default="all")
    p.add_argument("--store", default="al_store")
    p.add_argument(
        "--as-written",
        action="store_true",
        help="the TPC-H specification's SQL (subqueries kept), not the paper's rewrite",
    )
    p.set_defaults(func=queries)

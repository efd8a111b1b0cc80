"""The lineage commands: ``run`` a task file, list the ``runs`` of a store, derive
``lineage`` for output rows, write an audit ``report``, ``export`` a run for lineage catalogs;
``gc`` and ``verify`` the store."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from cda_workload.command_line.local_session import command_spark, existing_store, open_session
from cda_workload.command_line.progress import Progress
from materialization.catalog import StoreError

if TYPE_CHECKING:
    from tracing import AugmentedLineage, Run


def run_task(args: argparse.Namespace, progress: Progress) -> None:
    """Run a task file; with ``--mlflow`` the run logs itself as an MLflow run of its own,
    with ``--openlineage`` it sends its START and COMPLETE (or FAIL) events as it runs."""
    from cda_workload.command_line.task_file import load_task, task_code

    als = open_session(args.store, progress, args.verbose)
    if args.mlflow:
        als.mlflow = args.mlflow_dir or True
    if args.openlineage:
        als.listeners.append(_emitter(args.openlineage))
    task = load_task(args.taskfile, als)
    with progress.working(f"running {args.taskfile}"):
        code = task_code(args.taskfile, task)
        name = Path(args.taskfile).stem  # the MLflow run's and OpenLineage job's name
        run = als.run(task, args.strategy, backend=args.backend, code=code, reasons=args.reasons, name=name)
    record = run.record
    print(
        f"run {run.id}: {record['output']['rows']} output row(s) in {record['task_seconds']:.1f} s "
        f"(strategy {run.strategy}, backend {run.backend}, stored {run.stored_tuples} tuples)"
    )
    print(run.segments())
    if run.mlflow_run is not None:
        _say_tracked(run.mlflow_run)


def _emitter(target: str) -> Any:
    """OpenLineage events posted to ``target`` (an http(s) URL) or appended to it (a file), in
    the job namespace and under the parent run the environment names, as `al export`."""
    from tracing.present.openlineage_event import OpenLineageEmitter, ParentId

    if target.startswith(("http://", "https://")):
        transport = {"type": "http", "url": target}
    else:
        transport = {"type": "file", "log_file_path": target, "append": True}
    parent = os.environ.get("OPENLINEAGE_PARENT_ID")
    return OpenLineageEmitter(
        transport, os.environ.get("OPENLINEAGE_NAMESPACE"), parent=ParentId.parse(parent) if parent else None
    )


def list_runs(args: argparse.Namespace, progress: Progress) -> None:
    catalog = existing_store(args.store)  # reading JSON records: no Spark
    rows, unreadable = [], []
    for run_id in catalog.run_ids():
        try:
            r = catalog.read_run(run_id)
            rows.append(
                {
                    "run_id": r["run_id"],
                    "strategy": r["strategy"],
                    "backend": r.get("backend", "lazy"),
                    "output_rows": r["output"]["rows"],
                    "created": r.get("created", ""),
                    "task": _task_line(r["task"], None if args.json else 60),  # JSON: all of it
                }
            )
        except (StoreError, KeyError, TypeError) as exc:  # one damaged run hides no other
            lacks = f"the record of run {run_id!r} lacks {exc}"
            unreadable.append(str(exc) if isinstance(exc, StoreError) else lacks)
    rows.sort(key=lambda r: str(r["created"]))
    for problem in unreadable:
        print(f"skipped: {problem}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    if not rows:
        print(f"no runs in {catalog.uri}")
        return
    widths = {k: max(len(k), *(len(str(r[k])) for r in rows)) for k in rows[0]}
    print("  ".join(k.ljust(w) for k, w in widths.items()))
    for r in rows:
        print("  ".join(str(r[k]).ljust(w) for k, w in widths.items()))


def show(args: argparse.Namespace, progress: Progress) -> None:
    """`al show RUN_ID`: what a run is (its task, sources, models, segments and what it
    stored), from its record, checked as a question checks it; no Spark."""
    from segmenter.operators import Source
    from tracing.task_code import readable

    run = _open_run(args, progress)
    record = run.record
    origins = run.origins()
    sources = {}
    for leaf in run.task.root.walk():
        if isinstance(leaf, Source) and leaf.table not in sources:
            where = origins.get(leaf.table)
            sources[leaf.table] = (
                f"{where['format']} read in place: {where['location']} ({len(where['files'])} file(s))"
                if where is not None and not where["copy"]
                else f"store snapshot {leaf.snapshot}"
            )
    shown = {
        "run_id": run.id,
        "strategy": run.strategy,
        "backend": run.backend,
        "reasons": record.get("reasons", ""),
        "created": record.get("created", ""),
        "task_seconds": round(record["task_seconds"], 3),
        "output_rows": record["output"]["rows"],
        "stored_tuples": run.stored_tuples,
        "stored_bytes": run.stored_bytes,
        "index_bytes": run.index_bytes,
        "task": readable(record["task"].get("language"), record["task"].get("text") or "")
        or _task_line(record["task"], None),
        "sources": sources,
        "models": run.models,
        "segments": run.segments().splitlines(),
    }
    if args.json:
        print(json.dumps(shown, indent=2))
        return
    print(
        f"run {run.id}: {shown['output_rows']} output row(s) in {shown['task_seconds']:.1f} s, created "
        f"{shown['created']}\n  strategy {run.strategy}, backend {run.backend}, reasons {shown['reasons']}; "
        f"stored {run.stored_tuples:,} tuples ({run.stored_bytes:,} bytes), lineage indexes "
        f"{run.index_bytes:,} bytes"
    )
    print("task:", *(f"  {line}".rstrip() for line in shown["task"].strip().splitlines()), sep="\n")
    print("sources:", *(f"  {name}: {what}" for name, what in sources.items()), sep="\n")
    models = [
        f"  {udf}: {m.get('weights') or '(no weights file)'}, sha256 {m.get('sha256', '-')}"
        for udf, m in run.models.items()
    ]
    print("models:", *(models or ["  (none)"]), sep="\n")
    print("segments:", *(f"  {line}" for line in shown["segments"]), sep="\n")


def _task_line(task: dict[str, Any], width: int | None) -> str:
    """The task as one line: its SQL or code, whitespace collapsed, cut at ``width`` (Spark's
    plan is not something a person wrote, so only its kind)."""
    if task.get("language") not in ("sql", "code") or not task.get("text"):
        return "(a DataFrame)"
    line = " ".join(str(task["text"]).split())
    return line if width is None or len(line) <= width else line[: width - 1] + "…"


def collect_garbage(args: argparse.Namespace, progress: Progress) -> None:
    """`al gc`: what no run will read again, listed (a dry run) or removed; no Spark."""
    from materialization.garbage import find_garbage, remove

    if args.older_than < 0:
        raise ValueError(f"--older-than is a number of hours, at least 0 (got {args.older_than:g})")
    catalog = existing_store(args.store)
    found, warnings = find_garbage(catalog, args.older_than * 3600)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    verb = "removed" if args.apply else "would remove"
    for g in found:
        print(f"{verb} {g.path} ({g.bytes / 1e6:.1f} MB): {g.why}")
    total = sum(g.bytes for g in found) / 1e6
    if args.apply:
        remove(catalog, found)
        print(f"removed {len(found)} folder(s), {total:.1f} MB")
    else:
        hint = ": run with --apply to remove them" if found else ""
        print(f"{len(found)} folder(s), {total:.1f} MB{hint}")


def verify(args: argparse.Namespace, progress: Progress) -> None:
    """`al verify`: every file of the runs named (or of all runs and snapshots) hashed and
    compared with its record; damage is an error (exit 2) after every finding is listed."""
    from materialization.integrity import IntegrityError, verify
    from tracing.allowed_sql import stored_task

    if bool(args.run_ids) == args.all:
        raise ValueError("name the runs to verify, or pass --all (and no run id)")
    catalog = existing_store(args.store)
    with progress.working("verifying"):
        # a record's task checked as a question would check it (Spark started only if its
        # expressions need Spark's parser)
        found = verify(
            catalog, None if args.all else args.run_ids, lambda r, i: stored_task(r, i, command_spark)
        )
    for v in found:
        state = "ok" if not v.problems else f"DAMAGED ({len(v.problems)} problem(s))"
        print(f"{v.what}: {state}, {v.bytes:,} bytes hashed" + (f"; {v.note}" if v.note else ""))
        for problem in v.problems:
            print(f"  {problem}")
    damaged = [v.what for v in found if v.problems]
    if damaged:
        raise IntegrityError(f"{len(damaged)} of {len(found)} damaged: {', '.join(damaged)}")


def lineage(args: argparse.Namespace, progress: Progress) -> None:
    shape = "json" if args.json else args.format
    if (shape == "parquet") != (args.output is not None):
        raise ValueError("--format parquet writes to a folder: give both it and -o DIR")
    run = _load(args, progress)
    with progress.working(f"deriving the augmented lineage of run {run.id}"):
        found = _ask(run, args)
    if shape != "parquet":
        print(found.to_json() if shape == "json" else found)
        if args.mlflow:  # said on stderr: stdout holds the answer (JSON for --json)
            _say_tracked(_track(args, run, {"lineage_seconds": found.seconds}, answer=found), sys.stderr)
        return
    written = []
    for table, counts in found.to_parquet(args.output).items():  # never as Python rows
        written.append(Path(args.output) / f"{table}.parquet")
        rows = f"{counts['contributing']:,} contributing, {counts['control']:,} control rows"
        print(f"wrote {written[-1]}: {rows}")
    if args.mlflow:
        _say_tracked(_track(args, run, {"lineage_seconds": found.seconds}, written, folder="answers"))


def report(args: argparse.Namespace, progress: Progress) -> None:
    from tracing.present.report import audit_report, report_dict, to_json, write_text

    run = _load(args, progress)
    lineages = _per_row(run, args, progress)
    models = run.models
    written = [write_text(audit_report(run, lineages, models, args.where), args.output)]
    if args.json_out:
        written.append(write_text(to_json(report_dict(run, lineages, models)), args.json_out))
    for path in written:
        print(f"wrote {path}")
    if args.mlflow:
        seconds = sum(lin.seconds for lin in lineages)
        _say_tracked(_track(args, run, {"lineage_seconds": seconds, "answers": len(lineages)}, written))


def export(args: argparse.Namespace, progress: Progress) -> None:
    """`al export`: the run's START and COMPLETE OpenLineage events (the run opened, so checked
    against its digests), printed as JSON lines or sent through the client's transport."""
    from tracing.present.openlineage_event import JobId, ParentId, run_events, send
    from tracing.task_summary import task_name

    transport = _transport(args)  # a wrong option fails before the run is opened
    parent = ParentId.parse(args.parent) if args.parent else None
    run = _open_run(args, progress)
    store = run.session.store.uri
    job = JobId(args.namespace or store, args.job_name or task_name(run.record, run.task))
    events = run_events(run.record, run.task, store, job, parent)
    if transport is None:
        from openlineage.client.serde import Serde

        print("\n".join(json.dumps(Serde.to_dict(e)) for e in events))
        return
    send(events, transport)
    print(f"sent {len(events)} events ({transport['type']}) to {args.output or args.url}")


def _transport(args: argparse.Namespace) -> dict[str, Any] | None:
    """The client's transport config the options ask for; None: print to stdout."""
    kind = args.transport or ("file" if args.output else "stdout")
    needs = {"file": ("-o FILE", args.output), "http": ("--url URL", args.url)}
    if kind in needs and not needs[kind][1]:
        raise ValueError(f"--transport {kind} needs {needs[kind][0]}")
    if kind == "file":
        return {"type": "file", "log_file_path": args.output, "append": True}
    if kind == "http":
        return {"type": "http", "url": args.url}
    return None


def _ask(run: Run, args: argparse.Namespace) -> AugmentedLineage:
    """The lineage of the rows the options choose (--most-uncertain: a confidence run's rows
    whose probability is closest to ½)."""
    if args.most_uncertain is not None:
        rows = [r.row for r in run.confidence(explain=0).most_uncertain(args.most_uncertain)]
        return run.lineage(rows=rows, backend=args.backend, engine=args.engine)
    return run.lineage(
        where=args.where, sample=args.sample, seed=args.seed, backend=args.backend, engine=args.engine
    )


def _load(args: argparse.Namespace, progress: Progress) -> Run:
    for option, n in (("--sample", args.sample), ("--most-uncertain", args.most_uncertain)):
        if n is not None and n < 1:
            raise ValueError(f"{option} must be at least 1, got {n}")
    return _open_run(args, progress)


def _open_run(args: argparse.Namespace, progress: Progress) -> Run:
    existing_store(args.store).read_run(args.run_id)  # a typo fails before Spark starts
    return open_session(args.store, progress, args.verbose, question=True).load_run(args.run_id)


def _per_row(run: Run, args: argparse.Namespace, progress: Progress) -> list[AugmentedLineage]:
    """Each chosen output row's own answer (one question keeps them apart) when there are
    at most ``--max-rows`` of them (an auditor reads row by row), else one answer for all."""
    with progress.working(f"deriving the augmented lineage of run {run.id}"):
        whole = _ask(run, args)
    rows = len(whole)
    if not 1 < rows <= args.max_rows:
        if rows > 1:
            progress.say(f"{rows} output rows, more than --max-rows {args.max_rows}: one section for all")
        return [whole]
    return whole.rows


def _track(
    args: argparse.Namespace,
    run: Run,
    metrics: dict[str, Any],
    artifacts: Sequence[Path] = (),
    folder: str = "audit",
    answer: AugmentedLineage | None = None,
) -> str:
    """Add what the command made (metrics, files, the answer) to the MLflow run the task run
    was logged as (its ``al.run_id`` tag), or to a new one that logs the task run first; its id."""
    import mlflow

    from tracing.present.report import log_to_mlflow
    from tracing.tracking import log_answer, task_run

    with task_run(run, args.mlflow_dir) as tracked:
        mlflow.log_metrics({f"{args.command}.{k}": v for k, v in metrics.items()})
        log_to_mlflow(artifacts, folder)
        if answer is not None:
            log_answer(answer, tracked)
    return tracked


def _say_tracked(mlflow_run: str, stream: TextIO | None = None) -> None:  # None: sys.stdout now
    import mlflow

    print(f"MLflow run {mlflow_run} in {mlflow.get_tracking_uri()}", file=stream)


def add_lineage_commands(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """``run``, ``runs``, ``gc``, ``verify``, ``lineage``, ``report`` and ``export`` with their
    options."""
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument(
        "--store", default="al_store", help="results store: a folder or URI (default ./al_store)"
    )
    tracking = argparse.ArgumentParser(add_help=False)
    tracking.add_argument("--mlflow", action="store_true", help="also record this in MLflow")
    tracking.add_argument(
        "--mlflow-dir", help="local MLflow folder (default ./al_mlflow, or $MLFLOW_TRACKING_URI when set)"
    )
    choose = argparse.ArgumentParser(add_help=False)
    choose.add_argument("run_id", metavar="RUN_ID", help="a run id, as `al runs` lists them")
    which = choose.add_mutually_exclusive_group()
    which.add_argument("--where", help="output rows matching this SQL predicate, e.g. \"Judge = 'Reject'\"")
    which.add_argument("--sample", type=int, metavar="N", help="N output rows drawn at random (seeded)")
    which.add_argument(
        "--most-uncertain",
        type=int,
        metavar="N",
        help="the N output rows whose probability is closest to 1/2 (runs with --backend confidence)",
    )
    choose.add_argument("--seed", type=int, default=0, help="seed for --sample (default 0)")
    choose.add_argument(
        "--backend",
        choices=["lazy", "eager", "compressed", "confidence"],
        help="answer from the run's own backend (default), trace it (lazy), from the indexes kept "
        "(eager, compressed), or with each row's probability (confidence runs)",
    )
    choose.add_argument(
        "--engine",
        choices=["auto", "in-process", "spark"],
        help="where lazy tracing queries run (default auto: in process where that gives Spark's answers)",
    )

    p = sub.add_parser(
        "run",
        parents=[common, store, tracking],
        help="run a task file and keep the run in the store",
        description="Run a task (a .sql file over the store's tables, or a .py file defining task(als) "
        "that returns a DataFrame or SQL string) and print its run id and segments.",
    )
    p.add_argument("taskfile", metavar="TASKFILE", help="a .sql or .py task file")
    p.add_argument(
        "--openlineage",
        metavar="URL|FILE",
        help="send the run's OpenLineage START and COMPLETE (or FAIL) events as it runs: posted to an "
        "http(s) URL (a lineage server such as Marquez) or appended to a file as JSON lines",
    )
    p.add_argument("--strategy", choices=["fm", "rerun", "full"], help="what to store (default fm)")
    p.add_argument(
        "--backend",
        choices=["lazy", "eager", "compressed", "confidence"],
        default="lazy",
        help="lineage backend (default lazy; compressed: eager indexes kept ProvRC-compressed; "
        "confidence: also how likely each row is)",
    )
    p.add_argument(
        "--reasons",
        choices=["auto", "eager", "lazy"],
        default="auto",
        help="model reasons computed while the task runs (eager) or when a question reaches a call "
        "(lazy; default auto: lazy for models whose reasons are expensive)",
    )
    p.set_defaults(func=run_task)

    p = sub.add_parser("runs", parents=[common, store], help="list the runs in a store")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=list_runs)

    p = sub.add_parser(
        "show",
        parents=[common, store],
        help="what a run is: its task, sources, models, segments and what it stored",
        description="A run as its record describes it, checked as a question checks it; no Spark.",
    )
    p.add_argument("run_id", metavar="RUN_ID", help="a run id, as `al runs` lists them")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=show)

    p = sub.add_parser(
        "gc",
        parents=[common, store],
        help="list (or with --apply remove) what no run will read again",
        description="Staging folders of runs whose writer has ended, unfinished registrations and past "
        "source snapshots that no run reads, older than --older-than (a dry run unless --apply).",
    )
    p.add_argument("--apply", action="store_true", help="remove them (default: only list them)")
    p.add_argument(
        "--older-than", type=float, default=24.0, metavar="HOURS", help="leave younger folders (default 24)"
    )
    p.set_defaults(func=collect_garbage)

    p = sub.add_parser(
        "verify",
        parents=[common, store],
        help="check every file of runs (or of the whole store) against the digests recorded",
        description="Hash every file of the runs named (with --all: of every run and source snapshot) "
        "and compare it with the size and sha256 its record holds; exit 2 if anything is missing, "
        "changed or unlisted.",
    )
    p.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="runs to verify")
    p.add_argument("--all", action="store_true", help="every run and every source snapshot")
    p.set_defaults(func=verify)

    p = sub.add_parser(
        "lineage",
        parents=[common, store, choose, tracking],
        help="derive the augmented lineage of output rows of a run",
        description="Source rows and model calls (input, value, reason) behind output rows of a run: "
        "those matching --where, N sampled with --sample, or all of them.",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text (--format json)")
    p.add_argument(
        "--format",
        choices=["text", "json", "parquet"],
        default="text",
        help="text (default), JSON, or Parquet: one file per source table in -o DIR, each row marked "
        "contributing or control (an answer of millions of rows, never held as Python rows)",
    )
    p.add_argument("-o", "--output", metavar="DIR", help="the folder --format parquet writes")
    p.set_defaults(func=lineage)

    p = sub.add_parser(
        "export",
        parents=[common, store],
        help="export a run for a lineage catalog (its OpenLineage START and COMPLETE events)",
        description="The run's OpenLineage events (START, COMPLETE): the files and tables it read as "
        "inputs, named as openlineage-spark names them, its output with column lineage, its model calls "
        "and where to ask for per-row lineage as facets; printed as JSON lines or sent through the "
        "openlineage-python client's file or http transport, for Marquez, DataHub or OpenMetadata "
        "(docs/openlineage.md).",
    )
    p.add_argument("run_id", metavar="RUN_ID", help="a run id, as `al runs` lists them")
    p.add_argument("--format", choices=["openlineage"], default="openlineage", help="(default openlineage)")
    p.add_argument(
        "--namespace",
        default=os.environ.get("OPENLINEAGE_NAMESPACE"),
        help="the job's OpenLineage namespace (default $OPENLINEAGE_NAMESPACE, else the store's URI)",
    )
    p.add_argument(
        "--job-name",
        help="the job's name (default the task's: the name given to als.run, the function its code "
        "defines, else al.<tables read>.<digest>)",
    )
    p.add_argument(
        "--parent",
        metavar="NAMESPACE/JOB/RUN_ID",
        default=os.environ.get("OPENLINEAGE_PARENT_ID"),
        help="the run that started this one, for the parent run facet (default $OPENLINEAGE_PARENT_ID)",
    )
    p.add_argument(
        "--transport",
        choices=["stdout", "file", "http"],
        help="stdout (default: JSON lines), file (appends to -o FILE) or http (posts to --url)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="the file the file transport appends to")
    p.add_argument("--url", help="the http transport's base URL (events go to URL/api/v1/lineage)")
    p.set_defaults(func=export)

    p = sub.add_parser(
        "report",
        parents=[common, store, choose, tracking],
        help="write a self-contained HTML audit report for output rows of a run",
        description="A one-file HTML report (images embedded, no network needed to view it): the task, "
        "its models and checksums, and for each chosen output row its source rows and model reasons "
        "drawn for a person.",
    )
    p.add_argument("-o", "--output", default="report.html", help="HTML file to write (default report.html)")
    p.add_argument("--json-out", metavar="FILE", help="also write the report's content as JSON")
    p.add_argument(
        "--max-rows", type=int, default=20, help="one section per row up to this many rows (default 20)"
    )
    p.set_defaults(func=report)

"""``python -m cda_workload demo``: the main job on embedded defaults (local Spark, a Parquet
results store under ./al_store)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from segmenter.errors import LineageError


def _say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def demo(store: str, strategy: str) -> None:
    """The paper's loan example end to end: run, show tree and segments, explain ⟨Reject, 1⟩."""
    from cda_workload.loan_example import loan_task, register_loan_tables
    from tracing import LineageSession

    _say("starting local Spark")
    als = LineageSession(store=store, progress=_say)
    als.spark.sparkContext.setLogLevel("ERROR")
    register_loan_tables(als)
    run = als.run(loan_task(als), strategy=strategy)
    print("\nOperator tree\n" + run.tree())
    print("\nSegments\n" + run.segments())
    print("\nOutput")
    run.output.orderBy("Judge").show()
    _say("deriving the augmented lineage of <Reject, 1>")
    lineage = run.lineage(rows=[("Reject", 1)])
    print("\n" + str(lineage))
    out = Path(store) / f"lineage-{run.id}.json"
    out.write_text(lineage.to_json())
    print(f"\nrun id {run.id} is stored in {als.store.uri}; lineage JSON written to {out}")
    print(f'ask again later: LineageSession(store="{store}").load_run("{run.id}").lineage(...)')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cda_workload", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run_demo = sub.add_parser("demo", help="run the loan example and explain one output row")
    run_demo.add_argument("--store", default="al_store", help="results store folder (default ./al_store)")
    run_demo.add_argument("--strategy", default="fm", choices=["rerun", "full", "fm"])
    run_demo.add_argument("--verbose", action="store_true", help="show stack traces")
    args = parser.parse_args(argv)
    try:
        demo(args.store, args.strategy)
    except LineageError as exc:
        if args.verbose:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

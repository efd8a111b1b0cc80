"""al: the command line of augmented lineage for Spark.

    al run task.sql --store al_store --strategy fm     run a task, keep it in the store
    al runs --store al_store                           list the runs in a store
    al lineage RUN_ID --where "Judge = 'Reject'"       source rows and model reasons behind rows
    al report RUN_ID --sample 3 -o report.html         a self-contained HTML audit report
    al gc --store al_store [--apply]                   what no run will read again (dry run)
    al verify RUN_ID... | --all                        check stored files against their digests
    al show RUN_ID                                     what a run is: task, sources, models, segments
    al export RUN_ID --format openlineage              the run as an OpenLineage RunEvent (JSON)
    al demo                                            CDA queries with real models, explained
    al bench --queries Q3,Q9                           the benchmark of section 7
    al server start|stop|status                        the resident process that answers questions fast

Exit status: 0 done, 2 a usage or input error (one line on stderr saying what to change),
1 anything unexpected (the stack trace with --verbose). `python -m cda_workload` is the same.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from importlib.metadata import version

from cda_workload.command_line import question_server
from cda_workload.command_line.cli_lineage import add_lineage_commands
from cda_workload.command_line.cli_workload import add_workload_commands
from cda_workload.command_line.completion import bash_script
from cda_workload.command_line.progress import Progress
from segmenter.errors import LineageError

USER_ERRORS = (LineageError, ValueError, FileNotFoundError)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="al", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    top.add_argument("--version", action="version", version=f"al {version('augmented-lineage')}")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", action="store_true", help="show the stack trace of an error")
    add_lineage_commands(sub, common)
    add_workload_commands(sub, common)
    p = sub.add_parser(
        "completion",
        parents=[common],
        help="print a shell completion script: eval \"$(al completion bash)\" in ~/.bashrc",
    )
    p.add_argument("shell", choices=["bash"], help="the shell (bash; zsh reads it after bashcompinit)")
    p.set_defaults(func=lambda args, progress: print(bash_script(parser()), end=""))
    p = sub.add_parser(
        "server",
        parents=[common],
        help="the resident process that answers lineage, report, export, verify, show and runs "
        "without Python's imports (started by a question at a terminal; stops after 15 idle min)",
    )
    p.add_argument("action", choices=["start", "stop", "status"])
    p.set_defaults(func=server_command)
    return top


def server_command(args: argparse.Namespace, progress: Progress) -> None:
    """``al server start|stop|status``: one line on stdout saying what runs."""
    state = question_server.control("status" if args.action == "start" else args.action)
    if args.action == "start" and state is None:
        question_server.start_detached()
        deadline = time.monotonic() + 30
        while state is None and time.monotonic() < deadline:
            time.sleep(0.1)
            state = question_server.control("status")
        if state is None:
            log = question_server.socket_path().with_suffix(".log")
            raise LineageError(f"the server did not start: see {log}")
    if state is None:
        print("no server runs for this environment")
    elif args.action == "stop":
        print(f"stopped the server (pid {state['pid']}) after {state['questions']} questions")
    else:
        idle = state["idle_s"] / 60
        print(
            f"server pid {state['pid']} on {state['socket']}: {state['questions']} questions,"
            f" stops after {idle:g} idle min"
        )


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        args.func(args, Progress())
    except KeyboardInterrupt:
        print("al: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if _interrupted(exc):
            print("al: interrupted", file=sys.stderr)
            return 130
        if args.verbose:
            traceback.print_exc()
        user = isinstance(exc, USER_ERRORS)
        what = _first_line(exc) if user else f"unexpected {type(exc).__name__}: {_first_line(exc)}"
        hint = "" if user or args.verbose else " (run with --verbose for the stack trace)"
        print(f"al: error: {what}{hint}", file=sys.stderr)
        return 2 if user else 1
    return 0


def _interrupted(exc: Exception) -> bool:
    """Ctrl-C inside a DuckDB query comes back as DuckDB's error, not as KeyboardInterrupt."""
    named = type(exc).__name__ == "InterruptException"
    return named or (isinstance(exc, RuntimeError) and str(exc) == "Query interrupted")


def _first_line(exc: Exception) -> str:
    from tracing.errors import first_line

    return first_line(exc) if str(exc).strip() else type(exc).__name__

"""The ``al`` executable: a question answered by the resident server where one runs, else the
parser in process (:mod:`cda_workload.command_line.question_server`). Imports nothing heavy
before it knows which."""

from __future__ import annotations

import os
import sys

from cda_workload.command_line import question_server


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    served = question_server.wanted(argv)
    if served:
        code = question_server.ask(argv)
        if code is not None:
            return code
    from cda_workload.command_line.cli import main as in_process

    code = in_process(argv)
    if served and _start_one():
        question_server.start_detached()
        print(
            "al: started a question server for this environment: the next questions answer in"
            " under a second (`al server stop` ends it; AL_SERVER=off never starts one)",
            file=sys.stderr,
        )
    return code


def _start_one() -> bool:
    """``AL_SERVER=on`` always; by default only for someone at a terminal (not scripts or CI)."""
    setting = os.environ.get("AL_SERVER", "auto")
    return setting == "on" or (setting == "auto" and sys.stdin.isatty() and sys.stderr.isatty())

"""Every shell command line in the code blocks of the README and docs/ works as written: the
`al` questions about a run are run here, word for word, in a fresh folder (RUN_ID: the id the
block's `al run` printed); each other line is named below with where it runs (`.ci/run`,
whose text is checked to hold it, or the test that runs it). A documented command that fails,
or a new one that nothing runs, fails this test."""

from __future__ import annotations

import io
import re
import shlex
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cda_workload.command_line.cli import main

ROOT = Path(__file__).resolve().parent.parent
CI = (ROOT / ".ci" / "run").read_text()
_FENCE = re.compile(r"```(\w*)\s*")
_COMMAND = re.compile(r"(al|bash|mlflow|curl|python3?|\.venv/bin/\S+)\s")
_BENCH = "a benchmark (minutes to hours, figures in docs/results.md); test_workloads.py runs `bench`"
# a line not run here -> where it runs (".ci/run": checked to be in its text)
ELSEWHERE = {
    "bash setup.sh": ".ci/run",
    ".venv/bin/python -m cda_workload demo": ".ci/run",
    ".venv/bin/python -m pytest": ".ci/run",
    ".venv/bin/python -m cda_workload queries": ".ci/run",
    ".venv/bin/python -m cda_workload queries --as-written": ".ci/run",
    "python -m cda_workload queries": ".ci/run (as .venv/bin/python)",
    "al demo": ".ci/run (as .venv/bin/python -m cda_workload demo)",
    ".venv/bin/python examples/own_job.py": "test_the_own_job_example_runs_as_written",
    "al export RUN_ID --store al_store --transport http --url http://localhost:5000": "a lineage server"
    " (Marquez) on the reader's machine; test_openlineage.py posts the same events to a local endpoint",
    "al run examples/loan.py --store al_store --openlineage http://localhost:5000": "a lineage server"
    " (Marquez); test_openlineage.py checks the events a run sends as it runs",
    "al bench --queries Q3,Q9": _BENCH,
    ".venv/bin/python -m cda_workload.benchmarks.bench_jobs --rows 10000 --repeat 3": _BENCH,
    ".venv/bin/python -m cda_workload bench --sf 0.01 --queries Q3,Q9 --strategies rerun,fm,full "
    "--al-size 1,100 --repeat 5 --out bench_out": _BENCH,
    ".venv/bin/python -m cda_workload bench --workload lfw --sizes small,medium --out bench_lfw": _BENCH,
    "python -m cda_workload bench --sf 0.01 --queries Q2,Q17,Q19,Q20,Q21,Q3,Q18,Q16 --repeat 3 "
    "--al-size 1,100 --out cda_sf0.01": _BENCH,
    "python -m cda_workload bench --workload lfw --sizes small,medium --repeat 3 --al-size 1,100 "
    "--out lfw": _BENCH,
}


def command_blocks() -> Iterator[tuple[str, list[list[str]]]]:
    """(file:line of the block, its command lines as words) of every shell code block."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        block: list[list[str]] = []
        opened = shell = False
        pending, start = "", 0
        for n, raw in enumerate(path.read_text().splitlines(), 1):
            fence = _FENCE.fullmatch(raw.strip())
            if fence:
                if shell and block:
                    yield f"{path.name}:{start}", block
                opened = not opened
                shell, block, start = opened and fence[1] in ("", "bash", "sh", "shell"), [], n
                continue
            line = pending + raw.strip()
            if not shell or not _COMMAND.match(line):
                continue
            if line.endswith("\\"):
                pending = line[:-1]
                continue
            pending = ""
            block.append(shlex.split(line, comments=True))


def test_every_documented_command_line_runs_as_written(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # `al server start` here is this test's
    ran, made = [], {}  # made: the run id of each `al run` line (a block repeating one reuses it)
    for where, block in command_blocks():
        run_id = None
        for words in block:
            line = " ".join(words)
            if line in made:
                run_id = made[line]
                continue
            if line in ELSEWHERE:
                place = ELSEWHERE[line]
                assert not place.startswith(".ci/run") or shlex.join(_as_ci(words)) in CI, (where, line)
                continue
            assert words[0] == "al", f"{where}: {line!r} is run by no test: run it here or name where"
            argv = [run_id if w == "RUN_ID" else w for w in words[1:]]
            if "RUN_ID" in words:
                assert run_id is not None, f"{where}: {line!r} names RUN_ID before the block's `al run`"
            out, into = io.StringIO(), None
            if ">" in argv:  # a shell redirection: stdout into the file
                argv, into = argv[: argv.index(">")], argv[argv.index(">") + 1]
            with redirect_stdout(out):
                code = main(argv)
            assert code == 0, f"{where}: {line!r} exited {code}: {out.getvalue()[-500:]}"
            if into is not None:
                Path(into).write_text(out.getvalue())
            if argv[0] == "run":
                run_id = made[line] = out.getvalue().split()[1].rstrip(":")
            ran.append(argv[0])
    assert {"run", "runs", "lineage", "report", "gc", "verify", "export"} <= set(ran)
    for written in ("report.html", "report.json", "events.jsonl", "al_mlflow/mlflow.db"):
        assert (tmp_path / written).is_file() and (tmp_path / written).stat().st_size > 0, (
            written, sorted(p.name for p in tmp_path.iterdir()), ran
        )


def _as_ci(words: list[str]) -> list[str]:
    """A documented line as .ci/run writes it (`al` and bare `python` as the venv's)."""
    if words[0] == "al":
        return [".venv/bin/python", "-m", "cda_workload", *words[1:]]
    return [".venv/bin/python", *words[1:]] if words[0] == "python" else words

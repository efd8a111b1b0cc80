"""The ``al`` command line: help, a lineage question and a bad run id as a user runs them
(real processes: exit codes, clean JSON on stdout, one-line errors), the other commands
in-process on the test session's Spark (a JVM per command costs 10-30 s here). The report
it writes is loaded in a real headless browser."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import shlex
import shutil
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from cda_workload.command_line import cli_lineage
from cda_workload.command_line.cli import main
from cda_workload.command_line.progress import Progress
from tests.browser import render

ROOT = Path(__file__).resolve().parent.parent
AL = str(Path(sys.executable).with_name("al"))
ARTIFACTS = ROOT / "test-artifacts"
Done = subprocess.CompletedProcess


def _main(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def store(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("cli") / "store")


@pytest.fixture(scope="module")
def mlflow_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("mlflow"))


@pytest.fixture(scope="module")
def logged(store: str, mlflow_dir: str) -> tuple[str, str]:
    """`al run --mlflow` of the loan example: (its run id, the MLflow run it logged itself as)."""
    argv = ["run", str(ROOT / "examples" / "loan.py"), "--store", store, "--strategy", "fm"]
    code, out = _main(*argv, "--mlflow", "--mlflow-dir", mlflow_dir)
    assert code == 0, out
    first = out.splitlines()[0]
    assert first.endswith("(strategy fm, backend lazy, stored 4 tuples)") and "3 output row(s)" in first
    assert "segment 1 [Non-D] φ-π-⋈-σ" in out
    return first.split()[1].rstrip(":"), out.split("MLflow run ")[1].split()[0]


@pytest.fixture(scope="module")
def run_id(logged: tuple[str, str]) -> str:
    return logged[0]


@pytest.fixture(scope="module")
def commands(
    store: str, run_id: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, subprocess.CompletedProcess]:
    """Commands as processes, started together: `al lineage --json`, `al report --sample`,
    `al export` and a predicate naming no output column with no Java to start (answered in
    process from the store's files), a bad run id, and a predicate that divides by zero
    (which Spark judges)."""
    cwd = tmp_path_factory.mktemp("cwd")
    argvs = {
        "lineage": [AL, "lineage", run_id, "--store", store, "--where", "Judge = 'Reject'", "--json"],
        "report": [AL, "report", run_id, "--store", store, "--sample", "2", "-o", str(cwd / "r.html")],
        "export": [AL, "export", run_id, "--store", store],
        "column": [AL, "lineage", run_id, "--store", store, "--where", "Judgement = 'Reject'"],
        "bad": [AL, "lineage", "r-no-such-run", "--store", store],
        "zero": [AL, "lineage", run_id, "--store", store, "--where", "count / 0 > 1"],
    }
    no_java = {**os.environ, "JAVA_HOME": str(cwd / "no-java")}  # Spark could not start
    started = {
        k: subprocess.Popen(
            argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=None if k in ("bad", "zero") else no_java,
        )
        for k, argv in argvs.items()
    }
    done = {}
    for name, proc in started.items():
        out, err = proc.communicate(timeout=300)
        done[name] = subprocess.CompletedProcess(argvs[name], proc.returncode, out, err)
    return done


def test_help_reads_well() -> None:
    done = subprocess.run([AL, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    for command in ("run", "runs", "lineage", "report", "demo", "bench"):
        assert f"\n    {command} " in done.stdout
    assert "Exit status" in done.stdout
    usage = subprocess.run([AL, "lineage"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "the following arguments are required: RUN_ID" in usage.stderr


def test_runs_lists_the_run(store: str, run_id: str) -> None:
    code, out = _main("runs", "--store", store)
    assert code == 0
    header, row = out.splitlines()
    assert header.split() == ["run_id", "strategy", "backend", "output_rows", "created", "task"]
    assert row.split()[:4] == [run_id, "fm", "lazy", "3"]
    assert row.split(maxsplit=5)[5].startswith('"""The paper\'s loan example as a task file'), row
    code, out = _main("runs", "--store", store, "--json")
    (listed,) = json.loads(out)  # the task's whole text, not the table's 60 characters
    assert code == 0 and "…" not in listed["task"] and "def task(als: LineageSession)" in listed["task"]


def test_show_and_shell_completion(store: str, run_id: str) -> None:
    """`al show` describes a run from its record; `al completion bash` completes commands,
    options, an option's choices and run ids of the store named by --store."""
    code, out = _main("show", run_id, "--store", store, "--json")
    shown = json.loads(out)
    assert code == 0 and shown["run_id"] == run_id and shown["output_rows"] == 3
    assert sorted(shown["sources"]) == ["client", "debt", "loan"]
    assert all(where.startswith("store snapshot file:") for where in shown["sources"].values())
    assert shown["segments"][-1] == "segment 1 [Non-D] φ-π-⋈-σ  <- table client, table debt, table loan"
    assert "def task(als: LineageSession)" in shown["task"]
    code, out = _main("show", run_id, "--store", store)
    assert code == 0 and out.startswith(f"run {run_id}: 3 output row(s) in ")
    assert "\nsources:\n  client: store snapshot " in out and "\nsegments:\n  segment 0 " in out
    code, script = _main("completion", "bash")
    probes = [["al", "li"], ["al", "lineage", "--eng"], ["al", "lineage", "--engine", ""]]
    probes.append(["al", "show", "--store", store, ""])
    asked = "".join(
        f"COMP_WORDS=({shlex.join(words)}); COMP_CWORD={len(words) - 1}; _al; echo \"${{COMPREPLY[*]}}\"\n"
        for words in probes
    )
    done = subprocess.run(["bash"], input=script + asked, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["lineage", "--engine", "auto in-process spark", run_id]


def test_lineage_json(commands: dict) -> None:
    done = commands["lineage"]
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["targets"] == [{"Judge": "Reject", "count": 1}]
    assert [r["LoanID"] for r in answer["source_lineage"]["loan"]] == ["L02"]
    (call,) = answer["reasoning_lineage"]
    assert call["udf"] == "credit_rules" and call["reason"]["attributes"] == ["Debt", "LoanAmount"]


def test_questions_answered_in_process_start_no_jvm(commands: dict, run_id: str) -> None:
    """With no Java to start, a report of two sampled rows (drawn by their places in the
    output's files, read in process), the OpenLineage events and a predicate naming no output
    column (exit 2, the user's column names) are answered as `al lineage --json` is above;
    Spark starts only where a question needs it."""
    for name in ("report", "export"):
        done = commands[name]
        assert done.returncode == 0 and "starting Spark" not in done.stderr, done.stderr
    assert commands["report"].stdout.startswith("wrote ")
    page = Path(commands["report"].stdout.split()[1]).read_text()
    assert run_id in page and page.count('<li><a href="#row-') == 2  # two rows, each its section
    events = [json.loads(line) for line in commands["export"].stdout.splitlines()]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"] and run_id in commands["export"].stdout
    done = commands["column"]
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines()[-1] == (
        "al: error: invalid where=\"Judgement = 'Reject'\": no output column is named 'Judgement' "
        "(the output's columns: Judge, count)"
    )


def test_a_question_server_answers_as_the_process_does(
    commands: dict, store: str, run_id: str, tmp_path: Path
) -> None:
    """At a terminal, a question answered in process starts a server (one note on stderr);
    later questions, from a script too, are answered by its forked workers with the stdout,
    the progress lines, the one-line error and the exit status of the processes above (which
    ran with no server); `al server status` counts them and `al server stop` ends it."""
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path), "AL_SERVER": "auto", "AL_SERVER_IDLE_S": "120"}
    leader, follower = pty.openpty()
    shown = subprocess.run(
        [AL, "show", run_id, "--store", store], stdin=follower, stderr=follower,
        stdout=subprocess.PIPE, text=True, env=env, timeout=120,
    )  # fmt: skip
    os.close(follower)
    said = b""
    while select.select([leader], [], [], 0.5)[0]:
        try:
            said += os.read(leader, 65536)
        except OSError:
            break
    os.close(leader)
    assert shown.returncode == 0 and shown.stdout.startswith(f"run {run_id}: 3 output row(s)")
    assert b"started a question server" in said, said

    def al(*argv: str, **extra: str) -> Done:
        return subprocess.run([AL, *argv], capture_output=True, text=True, env={**env, **extra}, timeout=120)

    try:
        for _ in range(100):  # it imports for a few seconds before it listens
            if al("server", "status").stdout.startswith("server pid"):
                break
            time.sleep(0.3)
        no_java = str(tmp_path / "no-java")
        served = {name: al(*commands[name].args[1:], JAVA_HOME=no_java) for name in ("lineage", "column")}
        for name, done in served.items():
            alone = commands[name]
            assert done.returncode == alone.returncode, done.stderr
            assert _timeless(done.stdout) == _timeless(alone.stdout)
            assert _untimed(done.stderr) == _untimed(alone.stderr)
        assert "deriving the augmented lineage" in served["lineage"].stderr  # the worker's progress
        assert ": 2 questions, stops after 2 idle min" in al("server", "status").stdout
    finally:
        stopped = al("server", "stop").stdout
    assert stopped.startswith("stopped the server") and stopped.strip().endswith("after 2 questions")
    assert al("server", "status").stdout.strip() == "no server runs for this environment"


def _untimed(err: str) -> list[str]:
    """Progress and error lines without their clock times and durations."""
    return [re.sub(r"^\[\d\d:\d\d:\d\d\] |done in [\d.]+ s$", "", line) for line in err.splitlines()]


def _timeless(out: str) -> str:
    """An answer's JSON without its tracing queries' seconds (each process times its own)."""
    if not out.startswith("{"):
        return out
    answer = json.loads(out)
    for query in answer.get("tracing_queries", []):
        query.pop("seconds")
    return json.dumps(answer, sort_keys=True)


def test_lineage_as_parquet(store: str, run_id: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`--format parquet -o DIR`: one file per source table, its rows marked, the counts
    printed; without -o, one line and exit 2 before any question."""
    folder = tmp_path / "answer"
    asked = ("lineage", run_id, "--store", store, "--where", "Judge = 'Reject'", "--format", "parquet")
    code, out = _main(*asked, "-o", str(folder))
    assert code == 0, out
    tables = ("client", "debt", "loan")
    assert out.splitlines() == [f"wrote {folder / t}.parquet: 1 contributing, 0 control rows" for t in tables]
    written = pq.read_table(folder / "loan.parquet").to_pylist()
    assert [(r["LoanID"], r["lineage"]) for r in written] == [("L02", "contributing")]  # as --json
    capsys.readouterr()
    assert main(list(asked)) == 2
    said = capsys.readouterr().err.strip().splitlines()  # before any Spark or question
    assert said == ["al: error: --format parquet writes to a folder: give both it and -o DIR"]


def test_bad_run_id_is_one_line_and_exit_2(commands: dict) -> None:
    done = commands["bad"]
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("al:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr
    assert errors[0].startswith("al: error: no run 'r-no-such-run' in ")


def test_unanswerable_predicates_are_one_line_and_exit_2(
    commands: dict, store: str, run_id: str, capsys: pytest.CaptureFixture
) -> None:
    """A predicate that fails on the output's values, and ones past a bound before any parser
    or engine sees them (3,000 conjuncts killed the JVM thread serving Arrow; 3,000 nested
    parentheses overflowed Spark's parser; past the bound, a list of values is one IN)."""
    done = commands["zero"]
    assert done.returncode == 2 and "Traceback" not in done.stderr and '"ts":' not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    says = "where='count / 0 > 1' fails on the output's rows: [DIVIDE_BY_ZERO] Division by zero."
    assert last == f"al: error: {says}"
    for where, says in (
        (" AND ".join(["count > 0"] * 300), "where= has 299 AND/OR operators (at most 256)"),
        ("(" * 3000 + "count > 0" + ")" * 3000, "where= nests parentheses 3,000 deep (at most 64)"),
        ("Judge = '" + "x" * 30_000 + "'", "where= has 30,010 characters (at most 20,000)"),
    ):
        assert main(["lineage", run_id, "--store", store, "--where", where]) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].startswith(f"al: error: {says}")


def test_user_errors_exit_2_in_one_line(store: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["run", "no/such/task.sql", "--store", store]) == 2
    assert (
        capsys.readouterr().err.strip().splitlines()[-1] == "al: error: task file not found: no/such/task.sql"
    )
    broken = Path(store).parent / "broken"
    broken.mkdir(exist_ok=True)
    (broken / "syntax.py").write_text("def task(als):\n    return als.table('loan'\n")
    (broken / "raises.py").write_text("def task(als):\n    return 1 / 0\n")
    for name, says in (("syntax", "loading failed in"), ("raises", "task(als) failed in")):
        assert main(["run", str(broken / f"{name}.py"), "--store", store]) == 2
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert last.startswith(f"al: error: {says} {broken / name}.py, line ") and "Traceback" not in last
    typo = Path(store).parent / "no-such-store"
    assert main(["runs", "--store", str(typo)]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"al: error: no results store at {typo} (give --store)"
    assert not typo.exists()  # reading a store never creates one


def test_report_command_writes_html_json_and_mlflow(
    store: str, logged: tuple[str, str], mlflow_dir: str, tmp_path: Path
) -> None:
    """`al run --mlflow` logged the task run as an MLflow run of its own; `al report --mlflow`
    adds the report files to that same MLflow run, or records a run MLflow has not seen."""
    import mlflow

    run_id, task_run = logged
    tracking = ("--mlflow", "--mlflow-dir", mlflow_dir)
    html, js = tmp_path / "report.html", tmp_path / "report.json"
    code, out = _main(
        "report", run_id, "--store", store, "--sample", "2", "-o", str(html), "--json-out", str(js), *tracking
    )
    assert code == 0, out
    page_html = html.read_text()
    assert "register_loan_tables(als)" in page_html  # the task file's code, shown as SQL is
    assert page_html.count('<li><a href="#row-') == 2 and 'id="row-2"' in page_html  # summary, anchors
    assert "class='al-decisive'" in page_html  # credit_rules' decisive attributes marked in its input
    content = json.loads(js.read_text())
    assert content["run"]["run_id"] == run_id and len(content["answers"]) == 2  # one answer per row
    assert all(len(a["targets"]) == 1 for a in content["answers"])
    assert out.split("MLflow run ")[1].split()[0] == task_run
    client = mlflow.MlflowClient()
    logged = {a.path for a in client.list_artifacts(task_run, "audit")}
    assert logged == {"audit/report.html", "audit/report.json"}
    tracked = client.get_run(task_run).data
    assert tracked.tags["al.run_id"] == run_id and tracked.metrics["report.answers"] == 2
    assert client.get_run(task_run).info.run_name == "loan"  # the task file's name, not an id
    # an answer from the command line goes to the same MLflow run; stdout holds the JSON alone
    code, out = _main("lineage", run_id, "--store", store, "--sample", "1", "--json", *tracking)
    assert code == 0 and json.loads(out)["run_id"] == run_id
    (answer,) = client.list_artifacts(task_run, "answers")
    path = client.download_artifacts(task_run, answer.path, str(tmp_path / "answer"))
    assert json.loads(Path(path).read_text()) == json.loads(out)
    # the README's line on a run MLflow has not seen: a new MLflow run records it (it passed
    # the experiment's id as a run id: "Run with id=1 not found")
    fresh = str(tmp_path / "fresh-mlflow")
    code, out = _main("report", run_id, "--store", store, "--sample", "1", "-o", str(tmp_path / "r.html"),
                      "--mlflow", "--mlflow-dir", fresh)  # fmt: skip
    assert code == 0, out
    made = mlflow.MlflowClient().get_run(out.split("MLflow run ")[1].split()[0]).data  # in fresh
    assert made.tags["al.run_id"] == run_id and made.metrics["report.answers"] == 1
    page = render(html, tmp_path / "loan-report.png")
    assert page.console == [] and page.images == 0
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(page.screenshot, ARTIFACTS / "loan-report.png")


def test_unexpected_errors_exit_1_with_the_trace_only_when_verbose(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task file's own failure is the user's to fix (exit 2, its file and line); an engine
    failure is a bug (exit 1); either shows its stack trace only with --verbose."""
    task = tmp_path / "broken.py"
    task.write_text("def task(als):\n    raise RuntimeError('the task file broke')\n")
    said = f"al: error: task(als) failed in {task}, line 2: RuntimeError: the task file broke"
    assert main(["run", str(task), "--store", store]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == said
    assert main(["run", str(task), "--store", store, "--verbose"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1] == said

    def engine_bug(store: str) -> None:
        raise RuntimeError("an engine bug")

    monkeypatch.setattr(cli_lineage, "existing_store", engine_bug)
    assert main(["runs", "--store", store]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == (
        "al: error: unexpected RuntimeError: an engine bug (run with --verbose for the stack trace)"
    )
    assert main(["runs", "--store", store, "--verbose"]) == 1
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert "Traceback" in err and last == "al: error: unexpected RuntimeError: an engine bug"


def test_progress_is_plain_lines_off_a_terminal_and_rich_on_one() -> None:
    plain = io.StringIO()
    progress = Progress(plain)
    with progress.working("generating data"):
        progress.say("step")
    lines = plain.getvalue().splitlines()
    assert [re.sub(r"^\[\d\d:\d\d:\d\d\] ", "", line) for line in lines][:2] == [
        "generating data ...",
        "step",
    ]
    assert re.fullmatch(r"\[\d\d:\d\d:\d\d\] generating data: done in \d+\.\d s", lines[2])
    leader, follower = pty.openpty()
    with os.fdopen(follower, "w") as terminal:
        Progress(terminal).say("on a terminal")
    shown = os.read(leader, 4096).decode()
    os.close(leader)
    assert "\x1b[" in shown and "on a terminal" in shown and "progress.py" not in shown

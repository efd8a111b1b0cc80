"""A results store does not choose code or paths (issue 16): run ids of one safe form wherever
they enter, a duplicate refused before anything is written, a record that names a module or a
folder outside its run never acted on, one damaged record hiding no other run, and a question's
predicate limited to the output's rows. Each probe is done as an attacker would: by planting or
editing files in a real store, or by asking."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from cda_workload.command_line.cli import main
from materialization.catalog import StoreError, check_run_id
from materialization.integrity import IntegrityError
from materialization.locations import local_path
from segmenter.errors import LineageError
from tests.child_process import spark_child_env
from tests.failing_udf import fragile
from tracing import LineageSession, Run


@pytest.mark.parametrize(
    "bad", ["../../x", "a/b", "..", ".hidden", "", "x" * 129, "staging-r1", "r1\n", "r 1", None, 7]
)
def test_run_ids_of_one_safe_form(bad: object) -> None:
    with pytest.raises(StoreError, match="is not valid: use 1-128 letters, digits"):
        check_run_id(bad)


def test_run_ids_people_write_are_accepted() -> None:
    for good in ("r20261125T190804-fd4d300f", "nightly_2026.11.25", "Q2-fm", "x" * 128):
        assert check_run_id(good) == good


def _al(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_a_store_does_not_choose_code_paths_or_runs(
    als: LineageSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    als.register_table("nums", pd.DataFrame({"id": range(6), "grp": [i % 2 for i in range(6)]}), key="id")
    task = als.table("nums").filter("id < 6").groupBy("grp").count()
    runs = Path(als.store.path("runs").removeprefix("file:"))

    # an id is checked before anything runs or is written, in the API and in the CLI
    with pytest.raises(StoreError, match=re.escape("run id '../../x' is not valid")):
        als.run(task, run_id="../../x")
    assert not (tmp_path / "x").exists() and not runs.exists()
    mine = als.run(task, run_id="mine")
    before = mine.lineage(rows=[(0, 3)]).source_ids("nums")
    with pytest.raises(StoreError, match=r"run 'mine' already exists in .*; choose another run id"):
        als.run(task.filter("grp = 1"), run_id="mine")
    assert sorted(p.name for p in runs.iterdir()) == ["mine"]  # no staging left, the run intact
    assert als.load_run("mine").lineage(rows=[(0, 3)]).source_ids("nums") == before == {(0,), (2,), (4,)}
    code, _, err = _al("lineage", "../../x", "--store", als.store.uri)
    assert code == 2 and err.strip().splitlines()[-1].startswith("al: error: run id '../../x' is not valid")

    # a question's predicate reaches the output's rows and nothing else
    system = als.spark._jvm.java.lang.System
    refused = {
        "java_method('java.lang.System', 'setProperty', 'al.planted', 'y') IS NOT NULL": "java_method()",
        "reflect('java.lang.System', 'setProperty', 'al.planted', 'y') IS NOT NULL": "reflect()",
        "EXISTS (SELECT 1 FROM text.`/etc/hostname`)": "a subquery",
        "grp IN (SELECT 0)": "a subquery",
        "grp = (SELECT max(grp) FROM nums)": "a subquery",
        "exists(array(1), x -> x > 0)": "exists()",
    }
    for where, part in refused.items():
        for engine in ("in-process", "spark"):
            with pytest.raises(LineageError, match=re.escape(f"{part} is not allowed in a question")):
                mine.lineage(where=where, engine=engine)
    captured = als.run(task, backend="eager")  # forward questions choose source rows by predicate
    for where, part in refused.items():
        with pytest.raises(LineageError, match=re.escape(f"{part} is not allowed in a question")):
            captured.forward(table="nums", where=where)
    found = captured.forward(table="nums", where="id = 2").rows()
    assert found == [{"grp": 0, "count": 3, "dependence": "contributing"}]
    code, _, err = _al("lineage", "mine", "--store", als.store.uri, "--where", next(iter(refused)))
    assert code == 2 and "java_method() is not allowed in a question" in err.strip().splitlines()[-1]
    assert system.getProperty("al.planted") is None
    allowed = "grp = 0 AND lower(CAST(grp AS STRING)) LIKE '0%' AND `count` BETWEEN 1 AND 3"
    assert mine.lineage(where=allowed).source_ids("nums") == before

    # a planted record naming an importable module: loading the run does not import it
    module = tmp_path / "planted_module.py"
    marker = tmp_path / "imported"
    module.write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    record = json.loads((runs / "mine" / "run.json").read_text())

    def plant(run_id: str, **changes: object) -> None:
        shutil.copytree(runs / "mine", runs / run_id)
        (runs / run_id / "run.json").write_text(json.dumps(record | {"run_id": run_id} | changes))

    plant("planted", udfs={"planted_udf": "planted_module"})
    assert als.load_run("planted").lineage(rows=[(0, 3)]).source_ids("nums") == before
    assert not marker.exists() and "planted_module" not in sys.modules

    # a record's expressions run at question time: one edited to reflect into Java, or to read
    # a file through a subquery, is refused when the run is loaded
    edits = {
        "reflects": "java_method('java.lang.System', 'setProperty', 'al.planted', 'y') IS NOT NULL",
        "reads": "EXISTS (SELECT 1 FROM text.`/etc/hostname`)",
        "names": "input_file_name() IS NOT NULL",  # analysed only when a question ran (20 s later)
    }

    def edit_filter(value: object, edit: str) -> int:
        """The filter's condition ``id < 6`` in the record, ANDed with ``edit``: how many."""
        if isinstance(value, list):
            return sum(edit_filter(v, edit) for v in value)
        if not isinstance(value, dict):
            return 0
        if value.get("@") == "Expr" and "< 6" in value["sql"]:
            value["sql"] = f"({value['sql']}) AND {edit}"
            return 1
        return sum(edit_filter(v, edit) for v in value.values())

    for run_id, edit in edits.items():
        edited = json.loads(json.dumps(record)) | {"run_id": run_id}
        assert edit_filter(edited["task"], edit) == 1
        shutil.copytree(runs / "mine", runs / run_id)
        (runs / run_id / "run.json").write_text(json.dumps(edited))
    with pytest.raises(LineageError, match=r"run 'reflects' holds a call of java_method\(\), which no task"):
        als.load_run("reflects")
    with pytest.raises(LineageError, match="run 'reads' holds a subquery, which no task"):
        als.load_run("reads")
    with pytest.raises(LineageError, match=r"run 'names' holds a call of input_file_name\(\), which"):
        als.load_run("names")
    code, out, _ = _al("verify", "reflects", "reads", "--store", als.store.uri)  # as loading refuses them
    assert code == 2 and "holds a call of java_method(), which" in out and "holds a subquery, which" in out

    # records that point outside their run, or are not this run's, or are not JSON: one line
    plant("escapes", output=record["output"] | {"dir": "../mine/output"})
    plant("renamed")
    (runs / "renamed" / "run.json").write_text(json.dumps(record))  # says run_id "mine"
    plant("truncated")
    (runs / "truncated" / "run.json").write_text(json.dumps(record)[:40])
    refusals = {
        "escapes": "names a folder outside the run: '../mine/output'",
        "renamed": "is not this run's",
        "truncated": "is not valid JSON",
    }
    for run_id, says in refusals.items():
        with pytest.raises(StoreError, match=f"the record of run '{run_id}'.*{says}"):
            als.load_run(run_id)

    # `al runs` lists the good runs and names each damaged record on stderr
    code, out, err = _al("runs", "--store", als.store.uri)
    listed = [line.split()[0] for line in out.splitlines()[1:]]
    assert code == 0 and listed == ["mine", "names", "planted", "reads", "reflects", captured.id]
    skipped = [line for line in err.splitlines() if line.startswith("skipped: ")]
    assert len(skipped) == 3 and all(any(s in line for line in skipped) for s in refusals.values())


def test_what_questions_add_to_a_run_is_anchored_in_its_record(
    als: LineageSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 49: a cached reason forged and saved under the sha256 of its new bytes (the old
    one deleted) was shown by the next question and passed `al verify`. The record now lists
    every file a question adds: the forged one is never read, the deleted one is missing, and
    `al verify` names both. With $AL_STORE_KEY the record itself is sealed: one edited, or
    one written without the key, is refused."""
    als.register_table("nums", pd.DataFrame({"id": range(8), "grp": [i % 2 for i in range(8)]}), key="id")
    task = als.table("nums").withColumn("double", fragile("id")).groupBy("grp").count()
    run = als.run(task, strategy="fm", reasons="lazy")
    truth = run.lineage(where="grp = 1").reasoning_rows()
    folder = Path(local_path(run.dir) or "", "reasons")
    (cached,) = folder.glob("*/*.parquet")
    assert f"reasons/{cached.parent.name}/{cached.name}" in als.load_run(run.id).record["added"]
    table = pq.read_table(cached)
    forged_reasons = pa.array([{"note": "FORGED"}] * table.num_rows)
    forged = cached.with_name("forged.tmp")
    pq.write_table(table.set_column(table.column_names.index("__reason"), "__reason", forged_reasons), forged)
    named = cached.with_name(f"{hashlib.sha256(forged.read_bytes()).hexdigest()}.parquet")
    forged.rename(named)
    kept = cached.read_bytes()
    cached.unlink()
    shown = f"runs/{run.id}/reasons/{cached.parent.name}"
    with pytest.raises(IntegrityError, match=re.escape(f"{shown}/{cached.name} is missing")):
        als.load_run(run.id).lineage(where="grp = 1")
    code, out, _ = _al("verify", run.id, "--store", als.store.uri)
    assert code == 2 and f"{shown}/{named.name} is not in its record" in out, out
    named.unlink()  # a file no record lists is never read: with the listed one back, the truth
    cached.write_bytes(kept)
    assert als.load_run(run.id).lineage(where="grp = 1").reasoning_rows() == truth

    monkeypatch.setenv("AL_STORE_KEY", "the store's key")
    with pytest.raises(StoreError, match=f"the record of run '{run.id}' is not sealed by"):
        als.load_run(run.id)  # written without the key
    sealed = als.run(task, strategy="fm", reasons="lazy")
    assert sealed.lineage(where="grp = 1").reasoning_rows() == truth  # adds a file, seals again
    record = Path(local_path(sealed.dir) or "", "run.json")
    data = json.loads(record.read_text())
    assert data["seal"] and len(data["added"]) == 1
    name, (size, _) = next(iter(data["added"].items()))
    data["added"][name] = [size, hashlib.sha256(b"forged").hexdigest()]  # the forger's own digest
    record.write_text(json.dumps(data))
    with pytest.raises(StoreError, match=f"the record of run '{sealed.id}' has a seal"):
        als.load_run(sealed.id)
    code, out, _ = _al("verify", sealed.id, "--store", als.store.uri)
    assert code == 2 and "has a seal $AL_STORE_KEY does not give: edited" in out


def test_gc_removes_only_what_no_run_reads(als: LineageSession, tmp_path: Path) -> None:
    """`al gc`: the leftovers of a killed writer (a run staging folder whose process has ended,
    an old one whose writer is unknown, an unfinished registration) and a past snapshot no run
    reads are listed, then removed with --apply; a live writer's folder, the snapshot a run
    reads and the runs themselves stay, and the run answers as before."""
    frame = pd.DataFrame({"id": range(4), "grp": [0, 1, 0, 1]})
    als.register_table("nums", frame, key="id")
    read = als.run(als.table("nums").groupBy("grp").count())  # reads the first snapshot
    before = read.lineage().source_ids("nums")
    als.register_table("nums", frame.assign(grp=0), key="id")  # current: the second
    als.register_table("nums", frame.assign(grp=1), key="id")  # current: the third, the newest
    root = Path(als.store.path().removeprefix("file:"))
    snapshots = {p.name for p in (root / "sources" / "nums").iterdir() if p.is_dir()}
    current = max(snapshots)
    (first,) = [s for s in snapshots if s in json.dumps(read.record)]
    (past,) = snapshots - {first, current}
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    leftovers = {
        "staging-r-dead": {"host": socket.gethostname(), "pid": int(ended.stdout)},
        "staging-r-live": {"host": socket.gethostname(), "pid": os.getpid()},
        "staging-r-elsewhere": {"host": "another-host", "pid": 1},
    }
    for name, writer in leftovers.items():
        (root / "runs" / name / "output").mkdir(parents=True)
        (root / "runs" / name / "output" / "part-0.parquet").write_bytes(b"x" * 1000)
        (root / "runs" / name / "OWNER.json").write_text(json.dumps(writer))
    (root / "sources" / "nums" / "staging-s-killed").mkdir()
    day_ago = time.time() - 2 * 86_400
    os.utime(root / "runs" / "staging-r-elsewhere", (day_ago, day_ago))

    code, out, _ = _al("gc", "--store", als.store.uri)
    listed = sorted(line.split()[2] for line in out.splitlines() if line.startswith("would remove "))
    assert code == 0 and listed == ["runs/staging-r-dead", "runs/staging-r-elsewhere"]  # limit 24 h
    code, out, _ = _al("gc", "--store", als.store.uri, "--older-than", "0")
    listed = sorted(line.split()[2] for line in out.splitlines() if line.startswith("would remove "))
    assert code == 0 and listed == [
        "runs/staging-r-dead",
        "runs/staging-r-elsewhere",
        f"sources/nums/{past}",  # neither current nor read by the run
        "sources/nums/staging-s-killed",
    ]
    assert out.splitlines()[-1].startswith("4 folder(s), ") and (root / "runs" / "staging-r-dead").exists()
    code, out, _ = _al("gc", "--store", als.store.uri, "--older-than", "0", "--apply")
    assert code == 0 and out.splitlines()[-1].startswith("removed 4 folder(s)")
    kept = sorted(p.name for p in (root / "runs").iterdir())
    assert kept == sorted([read.id, "staging-r-live"])
    assert {p.name for p in (root / "sources" / "nums").iterdir() if p.is_dir()} == {first, current}
    assert als.load_run(read.id).lineage().source_ids("nums") == before
    assert als.table("nums").filter("grp = 1").count() == 4  # the current snapshot

    # other columns under a registered name: only when asked for
    with pytest.raises(StoreError, match=re.escape("'nums' is registered with other columns (id bigint")):
        als.register_table("nums", frame.rename(columns={"grp": "group"}), key="id")
    als.register_table("nums", frame.rename(columns={"grp": "group"}), key="id", replace=True)
    assert als.table("nums").columns == ["id", "group"]


@contextmanager
def _read_only(folder: Path) -> Iterator[None]:
    """``folder`` and everything in it made unwritable, for root too (``chattr +i``: CI runs as
    root, whom file modes do not stop), restored afterwards."""
    paths = [folder, *folder.rglob("*")]
    if os.geteuid() == 0:
        lock = subprocess.run(["chattr", "-R", "+i", str(folder)], capture_output=True, text=True)
        if lock.returncode != 0:
            pytest.skip(f"cannot make a folder read-only here: {lock.stderr.strip()}")
    else:
        for p in paths:
            p.chmod(p.stat().st_mode & ~0o222)
    try:
        yield
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-R", "-i", str(folder)], check=True)
        else:
            for p in paths:
                p.chmod(p.stat().st_mode | 0o200)


def test_a_moved_read_only_store_answers_the_same(als: LineageSession, tmp_path: Path) -> None:
    """Records name the store's files relative to it, and opening a store writes nothing: a
    store moved elsewhere (the original gone) and made unwritable (an archive, a colleague's)
    answers lazy questions (Rerun recomputing in process), eager ones and `al runs` as before;
    writing into it is one line."""
    als.register_table("nums", pd.DataFrame({"id": range(6), "grp": [i % 3 for i in range(6)]}), key="id")
    task = als.table("nums").filter("id > 0").groupBy("grp").count()
    runs = [als.run(task, strategy="rerun"), als.run(task, backend="eager")]
    asked = {run.id: run.lineage(where="grp = 1").to_dict()["source_lineage"] for run in runs}
    here = Path(als.store.uri.removeprefix("file:"))
    moved = tmp_path / "elsewhere" / "store"
    shutil.move(str(here), moved)
    assert str(here) not in "".join(p.read_text() for p in moved.rglob("*.json"))
    with _read_only(moved):
        reader = LineageSession(als.spark, store=str(moved))
        for run_id, answer in asked.items():
            assert reader.load_run(run_id).lineage(where="grp = 1").to_dict()["source_lineage"] == answer
        code, out, _ = _al("runs", "--store", str(moved))
        assert code == 0 and len(out.splitlines()) == 3
        assert reader.table("nums").count() == 6
        with pytest.raises(StoreError, match="is not writable"):
            reader.run(reader.table("nums").groupBy("grp").count())
        with pytest.raises(StoreError, match="is not writable"):
            reader.register_table("more", pd.DataFrame({"id": [1]}), key="id")


def test_concurrent_writers_and_a_killed_one_lose_nothing(spark: SparkSession, tmp_path: Path) -> None:
    """Three processes write one store at once, two rounds each (register the shared table, run
    a task over its current snapshot); one is killed (-9) at a random point of its second
    round. Every run a writer reported is listed and answers from the snapshot its record
    names; every registration a writer finished is one committed snapshot; what the killed one
    left unfinished is named by `al gc` and by nothing else."""
    store = tmp_path / "store"
    als = LineageSession(spark, store=str(store))
    env = spark_child_env(AL_SPARK_MASTER="local[1]", AL_DRIVER_MEMORY="1g", AL_SHUFFLE_PARTITIONS="1")
    repo = Path(__file__).resolve().parents[1]
    writers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.concurrent_writer", str(store), f"w{i}", "2"],
            stdout=subprocess.PIPE, stderr=(tmp_path / f"w{i}.err").open("w"), text=True, env=env, cwd=repo,
        )
        for i in range(3)
    ]
    victim = writers[-1]
    reported = {victim.stdout.readline().strip()}  # its first run is committed
    delay = random.uniform(0.0, 8.0)
    time.sleep(delay)
    victim.kill()
    reported |= {line.strip() for line in victim.stdout}
    victim.wait(timeout=60)  # reaped: a zombie still answers kill(pid, 0) as alive
    for i, w in enumerate(writers[:-1]):
        out, _ = w.communicate(timeout=400)
        assert w.returncode == 0, (tmp_path / f"w{i}.err").read_text()[-2000:]
        reported |= set(out.split())
    reported.discard("")

    listed = set(als.runs())
    # the killed writer may have committed a run it did not live to print
    assert reported <= listed and len(listed - reported) <= 1, (delay, reported, listed)
    shared = store / "sources" / "shared"
    committed = sorted(p.name for p in shared.iterdir() if not p.name.startswith("staging-"))
    made = [tuple(pd.read_parquet(shared / s).sort_values("id")[["w", "v"]].iloc[0]) for s in committed]
    survivors = [(f"w{i}", r) for i in range(2) for r in (0, 1)]
    assert sorted(m for m in made if m[0] != "w2") == survivors and len(made) == len(set(made)), (delay, made)
    assert als.store.current_source("shared").snapshot.endswith(committed[-1])
    for run_id in listed:
        run = als.load_run(run_id)
        (read,) = [s for s in committed if s in json.dumps(run.record)]
        rows = pd.read_parquet(shared / read)
        expected = rows.groupby(["w", "v"]).size().reset_index(name="count")
        assert sorted(map(tuple, run.output.toPandas().values.tolist())) == sorted(
            map(tuple, expected.values.tolist())
        )
        v = int(expected["v"].iloc[0])
        assert run.lineage(where=f"v = {v}").source_ids("shared") == {(i,) for i in rows.id[rows.v == v]}

    left = sorted(p.relative_to(store).as_posix() for p in store.glob("*/**/staging-*"))
    code, out, _ = _al("gc", "--store", als.store.uri, "--older-than", "0")
    named = sorted(p for line in out.splitlines() if "staging-" in (p := line.split()[2]))
    assert code == 0 and named == left, (delay, left, out)


def test_damaged_or_edited_files_are_errors_naming_them(als: LineageSession) -> None:
    """Every file of a run and of a snapshot is listed with its size and sha256 in its record,
    a cached reason too (when a question adds it): an edited stored value (rewritten, or one byte
    changed in place), an edited source row, an edited cached reason, a missing or an added
    file make the question fail in one line naming the file, `al verify` lists them all (exit
    2), and the restored store answers as before."""
    als.register_table("nums", pd.DataFrame({"id": range(20), "grp": [i % 3 for i in range(20)]}), key="id")
    task = als.table("nums").filter("id < 13").withColumn("double", fragile("id")).groupBy("grp").count()
    full = als.run(task, strategy="full")
    lazy = als.run(task, strategy="fm", reasons="lazy")
    def answer(run: Run) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        found = run.lineage(where="grp = 1")
        return found.source_rows("nums"), found.reasoning_rows()

    before = {r.id: answer(r) for r in (full, lazy)}
    root = Path(als.store.path().removeprefix("file:"))
    (cached,) = (root / "runs" / lazy.id / "reasons").glob("*/*.parquet")  # the question's reasons
    parts = sorted((root / "runs" / full.id / "segment-1").glob("part-*.parquet"))
    stored = next(p for p in parts if pq.read_table(p).num_rows)  # model values and reasons
    output = sorted((root / "runs" / full.id / "output").glob("part-*.parquet"))[0]
    snapshot = sorted((root / "sources" / "nums").glob("s*/part-*.parquet"))
    source = next(p for p in snapshot if pq.read_table(p).num_rows)
    code, out, _ = _al("verify", "--all", "--store", als.store.uri)
    assert code == 0 and out.count(": ok,") == 3, out

    def rewrite(path: Path, column: str, change: Callable[[Any], Any]) -> None:
        """``change`` the first value of the first column whose name starts with ``column``."""
        table = pq.read_table(path)
        name = next(n for n in table.column_names if n.startswith(column))
        values = table.column(name).to_pylist()
        values[0] = change(values[0])
        pq.write_table(table.set_column(table.column_names.index(name), name, pa.array(values)), path)

    def shown(path: Path) -> str:
        return path.relative_to(root).as_posix()

    kept = {p: p.read_bytes() for p in (cached, stored, output, source)}
    rewrite(stored, "double", lambda v: v + 1)  # a model's value
    with pytest.raises(StoreError, match=re.escape(f"run {full.id} is damaged: {shown(stored)}")):
        als.load_run(full.id)
    code, _, err = _al("lineage", full.id, "--store", als.store.uri, "--where", "grp = 1")
    said = [line for line in err.splitlines() if not line.startswith("[")]  # not progress
    assert code == 2 and len(said) == 1 and said[0].startswith("al: error: run "), err
    assert shown(stored) in said[0]
    stored.write_bytes(kept[stored])

    flipped = bytearray(kept[output])
    flipped[len(flipped) // 2] ^= 0xFF  # same size: only the digest tells
    output.write_bytes(flipped)
    with pytest.raises(StoreError, match=re.escape(f"{shown(output)} was changed: its sha256 differs")):
        als.load_run(full.id)
    output.write_bytes(kept[output])

    rewrite(source, "grp", lambda v: v + 10)
    with pytest.raises(StoreError, match=re.escape(f"run {lazy.id} is damaged: {shown(source)}")):
        als.load_run(lazy.id)
    with pytest.raises(StoreError, match=re.escape(f"a source the task reads is damaged: {shown(source)}")):
        als.run(task)
    rewrite(cached, "__reason", lambda v: {**v, "note": "edited"})
    (root / "runs" / full.id / "output" / "part-extra.parquet").write_bytes(kept[output])
    code, out, err = _al("verify", "--all", "--store", als.store.uri)
    assert code == 2 and "\nal: error: 3 of 3 damaged: " in err, (out, err)
    for damaged in (source, cached, root / "runs" / full.id / "output" / "part-extra.parquet"):
        assert shown(damaged) in out, out
    source.write_bytes(kept[source])
    with pytest.raises(StoreError, match=re.escape(shown(cached)) + " (holds|was changed)"):
        als.load_run(lazy.id).lineage(where="grp = 1")

    cached.write_bytes(kept[cached])
    (root / "runs" / full.id / "output" / "part-extra.parquet").unlink()
    stored.unlink()
    with pytest.raises(StoreError, match=re.escape(f"{shown(stored)} is missing")):
        als.load_run(full.id)
    stored.write_bytes(kept[stored])
    assert _al("verify", full.id, lazy.id, "--store", als.store.uri)[0] == 0
    assert {r: answer(als.load_run(r)) for r in before} == before

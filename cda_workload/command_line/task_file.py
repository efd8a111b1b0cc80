"""Tasks given as files to ``al run``: a ``.sql`` file of Spark SQL over the store's source
tables, or a ``.py`` file defining ``task(als)`` that may register tables and returns a
DataFrame or a SQL string. UDFs a task calls must live in importable modules (Spark's
workers import them, and so does a later process that recomputes lineage)."""

from __future__ import annotations

import importlib.util
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import DataFrame

from cda_workload.workloads.udfs import register_udfs_named_in
from segmenter.errors import LineageError
from tracing import LineageSession


def load_task(path: str | Path, als: LineageSession) -> DataFrame | str:
    """The task a file defines, ready for ``als.run``."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"task file not found: {file}")
    if file.suffix == ".sql":
        sql = file.read_text()
        if not sql.strip():
            raise ValueError(f"task file {file} is empty")
        register_udfs_named_in(als.spark, sql)
        return sql
    if file.suffix != ".py":
        raise ValueError(f"task file must be .sql or .py, not {file.name}")
    spec = importlib.util.spec_from_file_location(f"al_task_{file.stem}", file)
    assert spec is not None and spec.loader is not None  # a .py path always has a loader
    module = importlib.util.module_from_spec(spec)
    with _failures_of(file, "loading"):
        spec.loader.exec_module(module)
    task = getattr(module, "task", None)
    if not callable(task):
        raise ValueError(f"{file} defines no function task(als)")
    with _failures_of(file, "task(als)"):
        found = task(als)
    if isinstance(found, str):
        register_udfs_named_in(als.spark, found)
    elif not isinstance(found, DataFrame):
        raise ValueError(
            f"task(als) in {file} returned {type(found).__name__}, not a DataFrame or SQL string"
        )
    return found


class TaskFileError(ValueError):
    """The task file's own code failed: the user's to fix (exit 2), named with its line."""


@contextmanager
def _failures_of(file: Path, step: str) -> Iterator[None]:
    """An exception of the file's code as one line naming the file, the step and the line
    (a LineageError is already one: it passes as it is)."""
    try:
        yield
    except LineageError:
        raise
    except Exception as exc:
        mine = [
            f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == file.resolve()
        ]
        syntax = isinstance(exc, SyntaxError)
        line = exc.lineno if syntax else (mine[-1].lineno if mine else None)
        where = f"{file}, line {line}" if line else str(file)
        message = exc.msg if syntax else str(exc)
        raise TaskFileError(f"{step} failed in {where}: {type(exc).__name__}: {message}") from exc


def task_code(path: str | Path, task: DataFrame | str) -> str | None:
    """What a run of a file's task records as its code: the ``.py`` file's text when its
    task is a DataFrame (a SQL task records its own text)."""
    return Path(path).read_text() if isinstance(task, DataFrame) else None

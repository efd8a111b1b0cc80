"""The code a run records for its task, so a report can show a person what ran: a SQL task's
text; for a DataFrame, the code the caller gives (``als.run(df, code=...)``, the task file of
``al run``) or else Spark's analyzed plan (the statement that built a DataFrame cannot be
recovered reliably from Python)."""

from __future__ import annotations

import re
from dataclasses import replace

from pyspark.sql import DataFrame

from segmenter.operators import Task

LANGUAGES = {"sql": "Task SQL", "code": "Task code", "plan": "Task: Spark's analyzed plan (no code= given)"}


def with_code(task: Task, given: DataFrame | str, code: str | None) -> Task:
    """``task`` carrying the text a person reads for it, and what kind of text that is."""
    if isinstance(given, str):
        if code is not None:
            raise ValueError("code= describes a DataFrame task; a SQL task is recorded as its own text")
        return task
    if code is not None:
        if not isinstance(code, str) or not code.strip():
            raise ValueError("code= must be non-empty text (the code that built the DataFrame)")
        return replace(task, text=code, language="code")
    return replace(task, text=analyzed_plan(given), language="plan")


def readable(language: str | None, text: str) -> str:
    """A task's text as a person reads it: Spark's plan without its expression ids
    (``Income#27L``), which mean nothing to a reader; SQL and code as written."""
    return re.sub(r"#\d+L?\b", "", text) if language == "plan" else text


def analyzed_plan(df: DataFrame) -> str:
    """Spark's analyzed logical plan: the user's operators in their order, before optimization."""
    return str(df._jdf.queryExecution().analyzed().toString())

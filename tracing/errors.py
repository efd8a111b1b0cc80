"""Errors of lineage questions (the user can act on each)."""

import re
from collections.abc import Iterator
from contextlib import contextmanager

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, ParseException, PySparkException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from segmenter.errors import LineageError
from tracing.allowed_sql import check_where


def first_line(exc: Exception) -> str:
    """The line of an engine error a person needs (Spark's messages go on for pages)."""
    return str(exc).strip().splitlines()[0]


def filter_where(df: DataFrame, where: str) -> DataFrame:
    """``df`` filtered by the Spark SQL predicate ``where``, analysed now so that a typo fails
    here in one line instead of deep inside the first Spark job that reads it."""
    check_where(df.sparkSession, where)
    try:
        chosen = df.filter(F.expr(where))
        _ = chosen.schema
    except (AnalysisException, ParseException) as exc:
        raise LineageError(f"invalid where={where!r}: {first_line(exc)}") from None
    return chosen


# Spark's errors of evaluating values (ANSI mode), which a person's predicate can cause
_VALUE_ERRORS = frozenset(
    {
        "DIVIDE_BY_ZERO", "REMAINDER_BY_ZERO", "INTERVAL_DIVIDED_BY_ZERO", "ARITHMETIC_OVERFLOW",
        "CAST_INVALID_INPUT", "CAST_OVERFLOW", "NUMERIC_VALUE_OUT_OF_RANGE", "INVALID_ARRAY_INDEX",
        "INVALID_ARRAY_INDEX_IN_ELEMENT_AT", "DATETIME_OVERFLOW", "CANNOT_PARSE_TIMESTAMP",
        "INVALID_FRACTION_OF_SECOND",
    }
)  # fmt: skip
_ERROR_CLASS = re.compile(r"\[([A-Z][A-Z_]*)(?:\.[A-Z_]+)*\] ([^\n]*)")


@contextmanager
def value_errors(where: str | None) -> Iterator[None]:
    """A predicate that fails on the output's values (``1/0``, an overflow, a bad cast) as
    one line naming the predicate and Spark's error, not a Java stack trace."""
    try:
        yield
    except (Py4JJavaError, PySparkException) as exc:
        found = _ERROR_CLASS.search(str(exc))
        if where is None or found is None or found[1] not in _VALUE_ERRORS:
            raise
        message = found[2].split(" Use `try_", 1)[0].split(" If necessary set", 1)[0]
        raise LineageError(f"where={where!r} fails on the output's rows: [{found[1]}] {message}") from None


class TargetNotFoundError(LineageError):
    """Lineage was asked for rows that are not in the run's output."""


class NotCapturedError(LineageError):
    """The question needs lineage the eager run did not capture (a pruned table or direction),
    or the run was not captured eagerly at all."""

"""Errors of lineage questions (the user can act on each)."""

from pyspark.errors import AnalysisException, ParseException
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


class TargetNotFoundError(LineageError):
    """Lineage was asked for rows that are not in the run's output."""


class NotCapturedError(LineageError):
    """The question needs lineage the eager run did not capture (a pruned table or direction),
    or the run was not captured eagerly at all."""

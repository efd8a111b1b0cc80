"""Errors of lineage questions (the user can act on each)."""

from segmenter.errors import LineageError


def first_line(exc: Exception) -> str:
    """The line of an engine error a person needs (Spark's messages go on for pages)."""
    return str(exc).strip().splitlines()[0]


class TargetNotFoundError(LineageError):
    """Lineage was asked for rows that are not in the run's output."""


class NotCapturedError(LineageError):
    """The question needs lineage the eager run did not capture (a pruned table or direction),
    or the run was not captured eagerly at all."""

"""Errors of lineage questions (the user can act on each)."""

from segmenter.errors import LineageError


class TargetNotFoundError(LineageError):
    """Lineage was asked for rows that are not in the run's output."""


class NotCapturedError(LineageError):
    """The question needs lineage the eager run did not capture (a pruned table or direction),
    or the run was not captured eagerly at all."""

"""Errors a user can act on. Each says what is wrong and what to do, never a JVM stack."""


class LineageError(Exception):
    """Base of every error this framework raises on purpose."""


class UnsupportedTaskError(LineageError):
    """The task uses a construct outside σ π ⋈ α ∪ − φ (plus a final sort/limit)."""

    def __init__(self, construct: str, where: str, hint: str = "") -> None:
        self.construct = construct
        self.where = where
        message = f"unsupported in a lineage task: {construct} (at {where})"
        super().__init__(message + (f". {hint}" if hint else ""))


class UnknownSourceError(LineageError):
    """The task reads data that was not registered as a source table."""


TIE_MARKER = "AL_TASK_TIE_ERROR"  # brackets a rewrite's raise_error message in Spark's error


class OrderTieError(LineageError):
    """A task's data has ties where its lineage needs a total order (``row_number()``, a
    ROWS frame); nothing of the run was kept."""

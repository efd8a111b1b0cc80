"""The UDF contract of Definition 3: ``main`` (normal mode: Value) and ``main_with_reason``
(reasoning mode: Value and Reason), run by Spark as Arrow UDFs.

Subclass :class:`ReasoningUDF`, set ``name``, ``value_type`` and ``reason_type`` (Spark DDL),
implement the two entry points, and create one instance at module level in an importable
module. Calling the instance on columns gives a normal-mode Spark column, so the UDF is used
in ordinary DataFrame code; :meth:`ReasoningUDF.register` makes it callable from Spark SQL.
Models should override the ``*_batch`` methods to run inference on a whole Arrow batch.
A run read back in another process finds its UDFs among those already imported or declared
by an installed package (entry point group ``augmented_lineage.udfs``), never through a
module named in the store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib.metadata import EntryPoint, entry_points
from typing import Any, ClassVar

import pyarrow as pa
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from reasoning_udfs.spark_types import parse_type

ERROR_MARKER = "AL_UDF_ROW_ERROR"

_REGISTRY: dict[str, ReasoningUDF] = {}


class UDFRowError(RuntimeError):
    """A UDF raised on one input row; the message names the UDF and the row."""


class ReasoningUDF:
    name: ClassVar[str]
    value_type: ClassVar[str]
    reason_type: ClassVar[str]
    # "expensive": a reason costs many times the value (Integrated Gradients, say), so under
    # reasons="auto" a run computes reasons only for the calls a question reaches
    reason_cost: ClassVar[str] = "cheap"

    def __init__(self) -> None:
        for attr in ("name", "value_type", "reason_type"):
            if not isinstance(getattr(type(self), attr, None), str):
                raise TypeError(f"{type(self).__name__} must set the class attribute {attr!r}")
        known = _REGISTRY.get(self.name)
        if known is not None and type(known) is not type(self):
            raise ValueError(
                f"two UDFs are named {self.name!r} ({type(known).__qualname__} and "
                f"{type(self).__qualname__}); tasks find UDFs by name, so give each its own"
            )
        _REGISTRY[self.name] = self

    # --- the two entry points --------------------------------------------------------------
    def main(self, *args: Any) -> Any:
        raise NotImplementedError

    def main_with_reason(self, *args: Any) -> tuple[Any, Any]:
        raise NotImplementedError

    def probability(self, value: Any, reason: Any) -> float | None:
        """How likely ``value`` is right, read from the call's reason (a dict), for the
        confidence backend: each call becomes an uncertain fact with this probability. None
        (the default): the decision is taken as certain."""
        return None

    def main_batch(self, rows: Sequence[tuple]) -> list[Any]:
        """Values for a batch of argument tuples; override for batched inference."""
        return [self._call_row(self.main, row) for row in rows]

    def main_with_reason_batch(self, rows: Sequence[tuple]) -> list[tuple[Any, Any]]:
        """(Value, Reason) pairs for a batch of argument tuples."""
        return [self._call_row(self.main_with_reason, row) for row in rows]

    def _call_row(self, fn: Any, row: tuple) -> Any:
        try:
            return fn(*row)
        except Exception as exc:  # re-raised with the row, so the user can find it
            raise UDFRowError(
                f"{ERROR_MARKER}[{self.name}] raised {type(exc).__name__}: {exc} "
                f"on input row {row!r}{ERROR_MARKER}"
            ) from exc

    # --- Spark glue --------------------------------------------------------------------------
    def __call__(self, *cols: Column | str) -> Column:
        return self.spark_udf("normal")(*[F.col(c) if isinstance(c, str) else c for c in cols])

    def register(self, spark: SparkSession) -> None:
        """Make the UDF callable from Spark SQL under its name (normal mode)."""
        spark.udf.register(self.name, self.spark_udf("normal"))

    def spark_udf(self, mode: str) -> Any:
        """The Arrow UDF for ``mode`` ('normal' or 'reasoning')."""
        return F.arrow_udf(self.arrow_function(mode), self.output_type(mode))

    def output_type(self, mode: str) -> DataType:
        """Spark's type of a call's result: the Value, or in reasoning mode (value, reason)."""
        if mode not in ("normal", "reasoning"):
            raise ValueError(f"mode must be 'normal' or 'reasoning', not {mode!r}")
        value_type = parse_type(self.value_type)
        reason_type = parse_type(self.reason_type)
        check_reason_type(self.name, reason_type)
        if mode == "reasoning":
            return StructType([StructField("value", value_type), StructField("reason", reason_type)])
        return value_type

    def arrow_function(self, mode: str) -> Callable[..., pa.Array]:
        """The function Spark calls on Arrow batches of the arguments; the in-process tracing
        engine calls the very same one, so a rerun call gives what Spark's gives."""
        reasoning = mode == "reasoning"
        arrow_type = to_arrow_type(self.output_type(mode))
        udf_self = self

        def run(*arrays: pa.Array) -> pa.Array:
            rows = list(zip(*(a.to_pylist() for a in arrays)))
            try:
                if reasoning:
                    pairs = udf_self.main_with_reason_batch(rows)
                    data: list[Any] = [{"value": v, "reason": r} for v, r in pairs]
                else:
                    data = list(udf_self.main_batch(rows))
            except Exception as exc:
                from segmenter.errors import LineageError  # deferred: segmenter imports this module

                if not isinstance(exc, LineageError):  # the model cannot run at all: weights missing
                    raise
                raise UDFRowError(
                    f"{ERROR_MARKER}[{udf_self.name}] cannot run: {type(exc).__name__}: {exc}{ERROR_MARKER}"
                ) from exc
            return pa.array(data, type=arrow_type)

        run.__name__ = self.name
        return run

    def import_path(self) -> str:
        return type(self).__module__


def check_reason_type(name: str, dtype: DataType) -> None:
    """Reasons are compared and de-duplicated by Spark, which cannot do that on maps."""
    if isinstance(dtype, MapType):
        raise TypeError(f"UDF {name!r}: a reason may not be a map type; use array<struct<key, value>>")
    if isinstance(dtype, StructType):
        for f in dtype.fields:
            check_reason_type(name, f.dataType)
    if isinstance(dtype, ArrayType):
        check_reason_type(name, dtype.elementType)


UDF_ENTRY_POINTS = "augmented_lineage.udfs"


def declared_udfs() -> dict[str, EntryPoint]:
    """The UDFs installed packages declare (entry point group ``augmented_lineage.udfs``), by
    name: the allow-list from which a run made in another process finds its UDFs."""
    return {ep.name: ep for ep in entry_points(group=UDF_ENTRY_POINTS)}


def load_declared(name: str) -> ReasoningUDF | None:
    """UDF ``name``, imported through its declaration if this process has not defined it
    yet; None if no installed package declares it (a user's own UDF: import its module)."""
    if name not in _REGISTRY:
        ep = declared_udfs().get(name)
        if ep is None:
            return None
        ep.load()
    return _REGISTRY.get(name)


def lookup(name: str) -> ReasoningUDF:
    """The registered UDF ``name`` (a run loaded from a store loads its declared UDFs first)."""
    if name not in _REGISTRY:
        raise KeyError(
            f"UDF {name!r} is not a registered ReasoningUDF; create an instance of your "
            "ReasoningUDF subclass at module level in an importable module and import it "
            f"(or declare it in your package's {UDF_ENTRY_POINTS!r} entry points)"
        )
    return _REGISTRY[name]


def registered(name: str) -> bool:
    return name in _REGISTRY

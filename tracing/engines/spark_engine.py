"""The Spark engine: tracing queries as DataFrames, run where the task ran (any store, any
size, model calls rerun in reasoning mode)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StructField, StructType

from materialization.compile import ROW_ID, Compiler, aliased, conjunction, ident, struct_of
from materialization.pushdown import Restriction
from materialization.restore import Restorer
from materialization.settle import local_frame, settle
from segmenter.operators import Col, Expr, Node
from segmenter.segments import Segment
from tracing.engines import PARENT, Settled, renumber

CONSTRAINTS = "spark.sql.constraintPropagation.enabled"


@contextmanager
def _no_constraint_inference(spark: SparkSession) -> Iterator[None]:
    """A tracing query joins tagged inputs whose columns Spark sees under several aliases;
    its optimizer's constraint inference (InferFiltersFromConstraints) grows with their
    product: a question on the TPC-H Q10 shape spent over 120 of 130 s there (jstack), 5 s
    without. The filters it would add are on values the query already restricts; the task's
    own jobs keep the setting, restored after each tracing query."""
    before = spark.conf.get(CONSTRAINTS)
    spark.conf.set(CONSTRAINTS, "false")
    try:
        yield
    finally:
        spark.conf.set(CONSTRAINTS, before)


class SparkEngine:
    name = "spark"

    def __init__(self, restorer: Restorer) -> None:
        self.restorer = restorer
        self.spark = restorer.spark_of()
        # DataFrames this engine made from rows it collected, with those rows: their source
        # rows are renamed in process rather than by a Spark job (see :meth:`named`). Each
        # dict keeps its keys' objects alive, so an id names one object.
        self._held: dict[int, tuple[DataFrame, pa.Table]] = {}
        self._renamed: dict[int, tuple[pa.Table, DataFrame, Sequence[Col], bool]] = {}  # named() in process

    def _holding(self, df: DataFrame, rows: pa.Table) -> DataFrame:
        self._held[id(df)] = (df, rows)
        return df

    def _settled(self, rows: pa.Table, schema: StructType) -> Settled:
        """``rows``, collected here, as a Spark local relation of ``schema``."""
        df = self.spark.createDataFrame(rows, schema=schema)
        return Settled(self._holding(df, rows), rows.num_rows, rows)

    def _rows_of(self, df: DataFrame) -> pa.Table | None:
        held = self._held.get(id(df))
        return held[1] if held is not None else None

    def targets(self, df: DataFrame, local: pa.Table) -> DataFrame:
        return self._holding(df, local.select(df.columns))  # named in process

    def leaf_input(self, seg: Segment, leaf: Node, restriction: Restriction | None) -> DataFrame:
        return self.restorer.leaf_input(seg, leaf, restriction)

    def output(self, seg: Segment, restriction: Restriction | None) -> DataFrame:
        return self.restorer.output(seg, restriction)

    def reasoned(self, seg: Segment, rows: DataFrame) -> DataFrame:
        return rows  # inputs are restored in reasoning mode

    def tagged(
        self, rel: DataFrame, tag: str, cols: Sequence[Col], key: tuple[str, ...] | None = None
    ) -> DataFrame:
        """``rel`` with the struct of ``cols`` as ``tag``, every field nullable: where the tag is
        NULL (an outer join's padding, another branch of a union) a field declared NOT NULL (a
        literal, ``0 AS g``) holds nulls that ``toArrow`` refuses to cast (apache/arrow#37072)."""
        types = {f.name: f.dataType for f in rel.schema.fields}
        ids = [c.id for c in cols]
        nullable = StructType([StructField(i, types[i], True) for i in ids])
        return rel.withColumn(tag, struct_of(ids).cast(nullable))

    def body(self, node: Node, inputs: dict[int, DataFrame], probes: dict[int, str]) -> DataFrame:
        compiler = Compiler(self.spark, tagged=True, inputs=lambda n: inputs.get(id(n)), probes=probes)
        return compiler.compile(node)

    def matching(self, rel: DataFrame, probes: Settled, condition: Sequence[Expr]) -> DataFrame:
        if ROW_ID not in probes.rows.columns:
            return rel.join(probes.rows, conjunction(condition), "left_semi")
        joined = rel.join(probes.rows, conjunction(condition), "inner")
        return joined.selectExpr(*map(ident, rel.columns), ident(ROW_ID))

    def with_keys(self, rel: DataFrame, keys: Sequence[tuple[Col, Expr]]) -> DataFrame:
        return rel.withColumns({c.id: F.expr(e.sql) for c, e in keys})

    def semi(self, rel: DataFrame, restriction: Restriction, key: tuple[str, ...] | None = None) -> DataFrame:
        return restriction.attach(rel)  # Spark does not track which values are NULL: every column

    def numbered(self, targets: Settled) -> Settled:
        df: DataFrame = targets.rows
        rows = targets.local if targets.local is not None else df.toArrow()  # a few rows, settled
        rows = rows.append_column(ROW_ID, pa.array(range(rows.num_rows), pa.int64()))
        schema = StructType([*df.schema.fields, StructField(ROW_ID, LongType(), False)])
        return self._settled(rows, schema)

    def renumbered(self, rows: DataFrame, start: int) -> tuple[DataFrame, pa.Table]:
        held = self._rows_of(rows)
        fresh = renumber(held if held is not None else rows.toArrow(), start)
        kept = fresh.drop_columns([PARENT])
        return self._holding(local_frame(rows, kept), kept), fresh

    def settle(self, rel: DataFrame) -> Settled:
        with _no_constraint_inference(self.spark):
            rows, count, local = settle(rel)
        return Settled(rows if local is None else self._holding(rows, local), count, local)

    def split(self, settled: Settled, tag: str, distinct: bool = True) -> Settled:
        """On the driver when the joined rows were collected, else one (distinct) pass."""
        joined: DataFrame = settled.rows
        numbered = ROW_ID in joined.columns
        if settled.local is None:
            picked = joined.where(F.col(tag).isNotNull()).select(f"{tag}.*", *[ROW_ID] * numbered)
            return self.settle(picked.distinct() if distinct else picked)
        schema = joined.schema[tag].dataType
        if numbered:
            schema = StructType([*schema.fields, joined.schema[ROW_ID]])  # type: ignore[attr-defined]
        local: pa.Table = settled.local
        kept = local.filter(local.column(tag).is_valid())
        picked = kept.select([tag, *[ROW_ID] * numbered])
        picked = _distinct(picked) if distinct else picked
        rows = pa.Table.from_struct_array(picked.column(tag).combine_chunks())
        if numbered:
            rows = rows.append_column(ROW_ID, picked.column(ROW_ID))
        return self._settled(rows, schema)

    def absent(self, settled: Settled, tags: Sequence[str]) -> Settled:
        """In process when the rows were collected, else one Spark job."""
        joined: DataFrame = settled.rows
        numbered = ROW_ID in joined.columns
        if settled.local is not None:
            local: pa.Table = settled.local
            null = [pc.is_null(local.column(t)) for t in tags]
            kept = local.filter(functools.reduce(pc.or_, null))
            if numbered:
                rows = pa.table({ROW_ID: pc.unique(kept.column(ROW_ID))})
                return self._settled(rows, StructType([joined.schema[ROW_ID]]))
            one = pa.table({"one": pa.array([1] * min(1, kept.num_rows), pa.int32())})
            return self._settled(one, StructType([StructField("one", IntegerType(), False)]))
        picked = joined.where(" OR ".join(f"{ident(t)} IS NULL" for t in tags))
        return self.settle(picked.select(ROW_ID).distinct() if numbered else picked.limit(1).select(F.lit(1)))

    def picked(self, rel: DataFrame, cols: Sequence[str]) -> DataFrame:
        return rel.selectExpr(*map(ident, [*cols, *[ROW_ID] * (ROW_ID in rel.columns)]))

    def named(self, rel: DataFrame, cols: Sequence[Col], distinct: bool) -> DataFrame | pa.Table:
        """``cols`` of ``rel`` under their names; rows this engine holds are renamed (and
        made distinct) in process, with no Spark job."""
        held = self._rows_of(rel)
        if held is None:
            return self._named_frame(rel, cols, distinct)
        ids = [c.id for c in cols] + [ROW_ID] * (ROW_ID in held.column_names)
        names = [c.name for c in cols] + ids[len(cols) :]
        nullable = {f.name: f.nullable for f in rel.schema.fields}  # known here: made from the rows
        fields = [pa.field(n, held.schema.field(i).type, nullable[i]) for i, n in zip(ids, names)]
        picked = pa.Table.from_arrays([held.column(i) for i in ids], schema=pa.schema(fields))  # as toArrow()
        if distinct:
            picked = _distinct(picked)
        self._renamed[id(picked)] = (picked, rel, cols, distinct)  # a frame only if a union needs it
        return picked

    def _named_frame(self, rel: DataFrame, cols: Sequence[Col], distinct: bool) -> DataFrame:
        row_id = [ident(ROW_ID)] * (ROW_ID in rel.columns)
        out = rel.selectExpr(*[aliased(ident(c.id), c.name) for c in cols], *row_id)
        return out.distinct() if distinct else out

    def _frame_of(self, renamed: pa.Table) -> DataFrame:
        """The Spark frame of rows :meth:`named` renamed in process."""
        _, rel, cols, distinct = self._renamed[id(renamed)]
        return self._named_frame(rel, cols, distinct)

    def union_distinct(self, rels: list[Any]) -> DataFrame | pa.Table:
        if len(rels) == 1:
            return rels[0]
        frames = [r if isinstance(r, DataFrame) else self._frame_of(r) for r in rels]
        df = frames[0]
        for other in frames[1:]:
            df = df.unionByName(other)
        return df.distinct()


def _distinct(table: pa.Table) -> pa.Table:
    """Each row of ``table`` once, in first-seen order (as Spark's distinct: nested values
    compared by value, every NaN equal)."""
    unique: dict[Any, int] = {}
    for i, row in enumerate(zip(*(c.to_pylist() for c in table.columns))):
        unique.setdefault(_frozen(row), i)
    return table.take(pa.array(list(unique.values()), pa.int64()))


def _frozen(value: Any) -> Any:
    """A hashable stand-in for a row value (structs and arrays become tuples)."""
    if isinstance(value, float) and value != value:
        return _NAN
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    return value


_NAN = object()  # every NaN one value, as in Spark's grouping

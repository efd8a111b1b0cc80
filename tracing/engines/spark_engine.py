"""The Spark engine: tracing queries as DataFrames, run where the task ran (any store, any
size, model calls rerun in reasoning mode)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from materialization.compile import ROW_ID, Compiler, conjunction, ref
from materialization.pushdown import Restriction
from materialization.restore import Restorer
from materialization.settle import local_frame, settle
from segmenter.operators import Col, Expr, Node
from segmenter.segments import Segment
from tracing.engines import PARENT, Settled, renumber


class SparkEngine:
    name = "spark"

    def __init__(self, restorer: Restorer) -> None:
        self.restorer = restorer
        self.spark = restorer.spark

    def targets(self, df: DataFrame, local: pa.Table) -> DataFrame:
        return df

    def leaf_input(self, seg: Segment, leaf: Node, restriction: Restriction | None) -> DataFrame:
        return self.restorer.leaf_input(seg, leaf, restriction)

    def output(self, seg: Segment, restriction: Restriction | None) -> DataFrame:
        return self.restorer.output(seg, restriction)

    def reasoned(self, seg: Segment, rows: DataFrame) -> DataFrame:
        return rows  # inputs are restored in reasoning mode

    def tagged(self, rel: DataFrame, tag: str, cols: Sequence[Col]) -> DataFrame:
        return rel.withColumn(tag, F.struct(*[ref(c.id) for c in cols]))

    def body(self, node: Node, inputs: dict[int, DataFrame], probes: dict[int, str]) -> DataFrame:
        compiler = Compiler(self.spark, tagged=True, inputs=lambda n: inputs.get(id(n)), probes=probes)
        return compiler.compile(node)

    def matching(self, rel: DataFrame, probes: Settled, condition: Sequence[Expr]) -> DataFrame:
        if ROW_ID not in probes.rows.columns:
            return rel.join(probes.rows, conjunction(condition), "left_semi")
        joined = rel.join(probes.rows, conjunction(condition), "inner")
        return joined.select(*map(ref, rel.columns), ref(ROW_ID))

    def with_keys(self, rel: DataFrame, keys: Sequence[tuple[Col, Expr]]) -> DataFrame:
        return rel.withColumns({c.id: F.expr(e.sql) for c, e in keys})

    def semi(self, rel: DataFrame, restriction: Restriction) -> DataFrame:
        return restriction.attach(rel)

    def numbered(self, targets: Settled) -> Settled:
        df: DataFrame = targets.rows
        rows = targets.local if targets.local is not None else df.toArrow()  # a few rows, settled
        rows = rows.append_column(ROW_ID, pa.array(range(rows.num_rows), pa.int64()))
        schema = StructType([*df.schema.fields, StructField(ROW_ID, LongType(), False)])
        return Settled(self.spark.createDataFrame(rows, schema=schema), rows.num_rows, rows)

    def renumbered(self, rows: DataFrame, start: int) -> tuple[DataFrame, pa.Table]:
        fresh = renumber(rows.toArrow(), start)
        return local_frame(rows, fresh.drop_columns([PARENT])), fresh

    def settle(self, rel: DataFrame) -> Settled:
        rows, count, local = settle(rel)
        return Settled(rows, count, local)

    def split(self, settled: Settled, tag: str) -> Settled:
        """On the driver when the joined rows were collected, else one distinct pass."""
        joined: DataFrame = settled.rows
        numbered = ROW_ID in joined.columns
        if settled.local is None:
            picked = joined.where(F.col(tag).isNotNull()).select(f"{tag}.*", *[ROW_ID] * numbered)
            return self.settle(picked.distinct())
        schema = joined.schema[tag].dataType
        if numbered:
            schema = StructType([*schema.fields, joined.schema[ROW_ID]])  # type: ignore[attr-defined]
        local: pa.Table = settled.local
        tags, ids = local.column(tag).to_pylist(), local.column(ROW_ID).to_pylist() if numbered else None
        unique: dict[Any, int] = {}
        for i, value in enumerate(tags):
            if value is not None:
                unique.setdefault(_frozen((value, ids[i]) if ids is not None else value), i)
        picked = local.take(pa.array(list(unique.values()), pa.int64()))
        rows = pa.Table.from_struct_array(picked.column(tag).combine_chunks())
        if numbered:
            rows = rows.append_column(ROW_ID, picked.column(ROW_ID))
        return Settled(self.spark.createDataFrame(rows, schema=schema), rows.num_rows, rows)

    def named(self, rel: DataFrame, cols: Sequence[Col], distinct: bool) -> DataFrame:
        named = rel.select(*[ref(c.id).alias(c.name) for c in cols], *[ROW_ID] * (ROW_ID in rel.columns))
        return named.distinct() if distinct else named

    def union_distinct(self, rels: list[Any]) -> DataFrame:
        df = rels[0]
        for other in rels[1:]:
            df = df.unionByName(other)
        return df.distinct() if len(rels) > 1 else df


def _frozen(value: Any) -> Any:
    """A hashable stand-in for a row value (structs and arrays become tuples)."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    return value

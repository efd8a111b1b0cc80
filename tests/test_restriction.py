"""A restriction written as literals (few values, held in process) keeps the rows, and serves
the targets, that its join with the values keeps: null-safely, for every literal type."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from decimal import Decimal

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from materialization.compile import ROW_ID
from materialization.pushdown import LITERAL_ROWS, LITERAL_TERMS, Restriction

SCHEMA = "k int, s string, d decimal(15,2), t date, b boolean, f double"
ROWS = [
    (1, "a", Decimal("1.50"), date(2020, 1, 1), True, 0.5),
    (2, None, Decimal("2.00"), None, False, 1.5),
    (None, "c", None, date(2021, 5, 6), None, None),
    (1, "a", Decimal("1.50"), date(2020, 1, 1), True, 2.5),  # the same key as the first row
    (3, "it's", Decimal("-0.01"), date(1999, 12, 31), True, 0.5),
]
# values by target: target 1 is served by two values, one value serves targets 0 and 1
VALUES = [
    (1, "a", Decimal("1.50"), date(2020, 1, 1), True, 0.5, 0),
    (None, "c", None, date(2021, 5, 6), None, None, 1),
    (1, "a", Decimal("1.50"), date(2020, 1, 1), True, 0.5, 1),
    (3, "it's", Decimal("-0.01"), date(1999, 12, 31), True, 0.5, 2),
    (9, "z", Decimal("9.00"), date(2000, 1, 1), False, 9.0, 2),  # matches nothing
]


def _kept(df: DataFrame) -> list[str]:
    return sorted(map(repr, df.collect()))


def _joins(df: DataFrame) -> bool:
    return "Join" in df._jdf.queryExecution().optimizedPlan().toString()


def test_a_restriction_as_literals_keeps_what_its_join_keeps(spark: SparkSession) -> None:
    df = spark.createDataFrame(ROWS, SCHEMA)
    names = "vk int, vs string, vd decimal(15,2), vt date, vb boolean, vf double"
    values = spark.createDataFrame(VALUES, f"{names}, {ROW_ID} bigint")
    local = values.toArrow()
    exact = {"vk": "k", "vs": "s", "vd": "d", "vt": "t", "vb": "b"}
    for on in (exact, {"vs": "s"}, {"vt": "t"}, {"vd": "d", "vt": "t"}):  # NULLs among the values
        for numbered in (False, True):
            joined = Restriction(values, on, len(VALUES), numbered=numbered)
            literal = replace(joined, local=local)
            assert _joins(joined.attach(df)) and not _joins(literal.attach(df)), (on, numbered)
            assert _kept(literal.attach(df)) == _kept(joined.attach(df)), (on, numbered)
    # every row of the first key serves targets 0 and 1; the NULL row target 1; none serve 3
    served = Restriction(values, exact, len(VALUES), numbered=True, local=local).attach(df)
    literal_ids = sorted((r["k"], r["f"], r[ROW_ID]) for r in served.collect() if r["k"] is not None)
    assert literal_ids == [(1, 0.5, 0), (1, 0.5, 1), (1, 2.5, 0), (1, 2.5, 1), (3, 0.5, 2)]

    # a double is not written as a literal, nor are more values than LITERAL_ROWS, nor more
    # equalities than LITERAL_TERMS: the join
    floats = Restriction(values, {"vf": "f"}, len(VALUES), local=local)
    many = pa.concat_tables([local] * (LITERAL_ROWS // len(VALUES) + 1))
    wide = pa.concat_tables([local] * (LITERAL_TERMS // (len(VALUES) * len(exact)) + 1))
    assert wide.num_rows <= LITERAL_ROWS < many.num_rows
    for r in (floats, *(Restriction(values, exact, t.num_rows, local=t) for t in (many, wide))):
        assert _joins(r.apply(df))
    assert _kept(floats.apply(df)) == _kept(replace(floats, local=None).apply(df))

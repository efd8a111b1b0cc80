"""Reasons computed at question time (``reasons="lazy"``) must equal those the task would have
computed: every shipped UDF's reasoning-mode Arrow function, the one Spark's workers and the
in-process engine call, gives the same values and reasons for the same calls, whatever else is
in the batch and however often it runs."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import to_arrow_type

from reasoning_udfs.credit_exam import credit_exam, credit_exam_lime
from reasoning_udfs.face_recognition import face_recognition
from reasoning_udfs.loan_rules import credit_rules
from reasoning_udfs.name_from_path import name_from_path
from reasoning_udfs.person_detection import person_detection
from reasoning_udfs.spark_types import parse_type
from reasoning_udfs.text_rules import keyword_sentiment
from reasoning_udfs.text_sentiment import text_sentiment
from reasoning_udfs.udf import ReasoningUDF

FACES = "lfw_sample/George_W_Bush/George_W_Bush_0007.jpg", "lfw_sample/Colin_Powell/Colin_Powell_0006.jpg"
PHOTOS = "coco_sample/images/val2017/000000000785.jpg", "coco_sample/images/val2017/000000000285.jpg"
TEXTS = "This product is great", "Terrible, it broke after a day", None
LOANS = (3400, 810, 4000), (2200, 1350, 20000), (3000, 1200, 9000)
CALLS: list[tuple[ReasoningUDF, list[str], list[tuple[Any, ...]]]] = [
    (credit_exam, ["double", "double", "double"], list(LOANS)),
    (credit_exam_lime, ["double", "double", "double"], list(LOANS)),
    (credit_rules, ["bigint", "bigint", "bigint"], list(LOANS)),
    (face_recognition, ["string"], [(p,) for p in FACES]),
    (name_from_path, ["string"], [(p,) for p in FACES]),
    (person_detection, ["string"], [(p,) for p in PHOTOS]),
    (keyword_sentiment, ["string"], [(t,) for t in TEXTS]),
    (text_sentiment, ["string"], [(t,) for t in TEXTS]),
]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _batch(types: list[str], rows: list[tuple[Any, ...]]) -> list[pa.Array]:
    return [pa.array(list(col), type=to_arrow_type(parse_type(t))) for t, col in zip(types, zip(*rows))]


@pytest.mark.parametrize("udf, types, rows", CALLS, ids=[u.name for u, _, _ in CALLS])
def test_reasons_are_a_function_of_the_call(
    spark: SparkSession, udf: ReasoningUDF, types: list[str], rows: list[tuple[Any, ...]]
) -> None:
    run = udf.arrow_function("reasoning")
    whole = run(*_batch(types, rows)).to_pylist()
    assert whole == run(*_batch(types, rows)).to_pylist(), "a second run gives other reasons"
    reversed_ = run(*_batch(types, rows[::-1])).to_pylist()[::-1]
    singles = [run(*_batch(types, [r])).to_pylist()[0] for r in rows]
    assert whole == reversed_ == singles, "a call's reason depends on its batch"
    assert any(r["reason"] is not None for r in whole)
    assert [r["value"] for r in whole] == udf.arrow_function("normal")(*_batch(types, rows)).to_pylist()

"""Bad input gives one clear error naming the problem, never a JVM stack, and loses nothing."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from materialization.catalog import StoreError
from materialization.execute import UDFError
from segmenter.errors import LineageError, OrderTieError, UnknownSourceError, UnsupportedTaskError
from tests.failing_udf import fragile
from tracing import LineageSession, TargetNotFoundError


@pytest.fixture
def numbers(als: LineageSession) -> LineageSession:
    als.register_table("nums", pd.DataFrame({"id": range(20), "grp": [i % 3 for i in range(20)]}), key="id")
    als.register_table("other", pd.DataFrame({"id": [1, 2], "tag": ["a", "b"]}), key="id")
    return als


def _no_jvm_noise(exc: BaseException) -> None:
    text = str(exc)
    assert "py4j" not in text and "at org.apache" not in text and len(text.splitlines()) <= 2, text


def test_row_number_is_traced_where_its_order_has_no_ties(numbers: LineageSession) -> None:
    """row_number() over a unique order: a row's lineage is the rows of its partition up to
    it. Over an order with ties Spark numbers them arbitrarily: the run fails in one line
    naming the window (a SQL ROWS frame too), and nothing of it is kept."""
    by_id = Window.partitionBy("grp").orderBy("id")
    run = numbers.run(numbers.table("nums").withColumn("n", F.row_number().over(by_id)).filter("n = 3"))
    assert sorted(tuple(r) for r in run.output.collect()) == [(6, 0, 3), (7, 1, 3), (8, 2, 3)]
    assert run.lineage(rows=[{"id": 7}]).source_ids("nums") == {(1,), (4,), (7,)}
    tied = numbers.table("nums").withColumn("n", F.row_number().over(Window.orderBy("grp")))
    frame = "SELECT sum(id) OVER (ORDER BY grp ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM nums"
    said = r"\(ORDER BY (nums\.)?grp ASC NULLS FIRST\) at Project > Project > Window.*breaks the tie"
    for task in (tied, frame):
        with pytest.raises(OrderTieError, match=said) as info:
            numbers.run(task)
        _no_jvm_noise(info.value)
    assert numbers.runs() == [run.id]  # the failed runs left nothing behind


def test_pivot_of_strings_is_an_aggregation_per_group(numbers: LineageSession) -> None:
    """A pivot Spark expands into one conditional aggregate per value (max of a string has
    no in-place buffer; numbers take the PivotFirst path, checked by the differential suite):
    a row's lineage is its whole group, rows of values not pivoted on included."""
    sql = """SELECT * FROM (SELECT grp, id % 4 AS m, CAST(id AS STRING) AS s FROM nums)
             PIVOT (max(s) FOR m IN (0 AS zero, 1 AS one))"""
    run = numbers.run(sql)
    assert sorted(tuple(r) for r in run.output.collect()) == [(0, "12", "9"), (1, "4", "13"), (2, "8", "5")]
    assert run.lineage(rows=[{"grp": 1}]).source_ids("nums") == {(i,) for i in range(1, 20, 3)}


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        ("SELECT id FROM nums INTERSECT ALL SELECT id FROM other", r"INTERSECT ALL.*LEFT SEMI JOIN"),
        ("SELECT lag(id) OVER (ORDER BY id) FROM nums", r"window function lag\(\).*rank\(\)"),
        (
            "SELECT sum(id) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM nums",
            r"window function sum\(\) over ROWS BETWEEN 2 PRECEDING AND CURRENT ROW\b.*sliding frame",
        ),
        (
            "SELECT avg(id) OVER (ORDER BY id RANGE BETWEEN CURRENT ROW AND 3 FOLLOWING) FROM nums",
            r"window function avg\(\) over RANGE BETWEEN CURRENT ROW AND 3 FOLLOWING\b.*sliding frame",
        ),
    ],
    ids=["intersect_all", "lag", "sliding_frame", "range_ahead"],
)
def test_constructs_without_lineage_yet_say_what_to_write(
    numbers: LineageSession, sql: str, refused: str
) -> None:
    with pytest.raises(UnsupportedTaskError, match=refused) as info:
        numbers.parse(sql)
    _no_jvm_noise(info.value)


def test_in_memory_dataframe_must_be_registered(numbers: LineageSession, spark: SparkSession) -> None:
    df = spark.createDataFrame([(1,)], ["x"])
    with pytest.raises(UnsupportedTaskError, match="register_table"):
        numbers.run(df.filter("x > 0"))


def test_other_file_formats_are_named(numbers: LineageSession, spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "loose")
    spark.range(3).selectExpr("cast(id AS string) AS value").write.text(path)
    with pytest.raises(UnknownSourceError, match=r"loose as text; files are read in place as parq") as info:
        numbers.run(spark.read.text(path))
    _no_jvm_noise(info.value)


def test_invalid_sql_is_one_line(numbers: LineageSession) -> None:
    with pytest.raises(LineageError, match="invalid SQL task") as info:
        numbers.run("SELECT nope FROM nums")
    _no_jvm_noise(info.value)
    deep = "SELECT * FROM nums WHERE " + "(" * 3000 + "x > 0" + ")" * 3000  # overflowed Spark's parser
    with pytest.raises(LineageError, match=r"^the SQL task nests parentheses 3,000 deep \(at most 128\)$"):
        numbers.run(deep)


def test_names_and_keys_that_name_nothing_are_refused(numbers: LineageSession) -> None:
    """A source name is a whole identifier (one ending in a line break was accepted); a pandas
    key holding NaN (pandas' missing value, stored as NULL by Spark) is refused, and so is a
    column of only missing values, whose type Spark cannot tell."""
    with pytest.raises(StoreError, match=re.escape("source name 'w\\n' must be a SQL identifier")):
        numbers.register_table("w\n", pd.DataFrame({"k": [1]}))
    with pytest.raises(ValueError, match="key column 'k' of 'nan_keys' holds NaN in 1 row"):
        numbers.register_table("nan_keys", pd.DataFrame({"k": [1.0, float("nan")]}), key="k")
    said = "column(s) 'note' of 'blank' hold only missing values, so Spark cannot tell their type"
    with pytest.raises(ValueError, match=re.escape(said)):  # not Spark's UNSUPPORTED_DATATYPE "VOID"
        numbers.register_table("blank", pd.DataFrame({"k": [1, 2], "note": [None, None]}), key="k")


def test_a_spark_connect_session_is_refused_before_anything_runs() -> None:
    """One line naming what to use, before any store is touched (it failed inside the store
    with PySpark's JVM_ATTRIBUTE_NOT_SUPPORTED). No Connect session can be made here (no grpc):
    a stand-in of its class's module, which is what the check reads."""
    connect = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})
    said = r"^Spark Connect sessions are not supported: .* use a classic SparkSession"
    with pytest.raises(LineageError, match=said):
        LineageSession(spark=connect(), store="never-made")
    assert not Path("never-made").exists()


def test_unknown_strategy(numbers: LineageSession) -> None:
    with pytest.raises(ValueError, match="rerun, full, fm"):
        numbers.run(numbers.table("nums"), strategy="everything")


def test_targets_not_in_output(numbers: LineageSession) -> None:
    """A given row is found by its every value, a void column's NULL too (Spark's hash join
    matched no NULL of type void: such rows were "not in the output" on Spark)."""
    run = numbers.run("SELECT grp, count(*) AS count, NULL AS note FROM nums GROUP BY grp", strategy="full")
    found = run.lineage(rows=[(1, 7, None), {"grp": 2, "count": 6, "note": None}], engine="spark")
    assert found.source_ids("nums") == {(i,) for i in range(20) if i % 3}
    with pytest.raises(TargetNotFoundError, match="not in the output"):
        run.lineage(rows=[{"grp": 7, "count": 1}])
    with pytest.raises(TargetNotFoundError, match="no output row"):
        run.lineage(where="grp > 100")
    with pytest.raises(LineageError, match="unknown column"):
        run.lineage(rows=[{"nope": 1}])
    said = r"^rows= gives the columns \['grp'\] in one row and \['grp', 'count'\] in another: give every"
    with pytest.raises(LineageError, match=said):  # a column left out is not matched as NULL
        run.lineage(rows=[{"grp": 1, "count": 7}, {"grp": 2}])
    with pytest.raises(LineageError, match="invalid where"):
        run.lineage(where="nope = 1")
    for sample in (-1, 0, 1.5, True):
        with pytest.raises(ValueError, match=r"sample= is a number of output rows, at least 1") as info:
            run.lineage(sample=sample)  # type: ignore[arg-type]
        _no_jvm_noise(info.value)


def test_union_of_branches_with_literal_columns(numbers: LineageSession) -> None:
    """A ROLLUP written as a UNION of branches with ``0 AS g`` and ``NULL AS grp`` (DuckDB's
    TPC-DS q27 and q36): a row of one branch has the other branch's tag NULL, and the tag's
    NOT NULL field (the literal) then held nulls that ``toArrow`` refused to cast on the Spark
    engine (ArrowInvalid). Both engines give each row its branch's rows."""
    sql = (
        "SELECT grp, 0 AS g, count(*) AS n FROM nums GROUP BY grp "
        "UNION ALL SELECT NULL AS grp, 1 AS g, count(*) AS n FROM nums"
    )
    run = numbers.run(sql, strategy="fm")
    for engine in ("spark", "in-process"):
        found = run.lineage(rows=[(1, 0, 7), (None, 1, 20)], engine=engine)
        assert sorted(sorted(r.source_ids("nums")) for r in found.rows) == [
            [(i,) for i in range(20)],
            [(i,) for i in range(20) if i % 3 == 1],
        ], engine


def test_unknown_run_id(numbers: LineageSession) -> None:
    with pytest.raises(StoreError, match="no run 'r-missing'"):
        numbers.load_run("r-missing")


def test_udf_failure_names_udf_and_row_and_leaves_nothing(numbers: LineageSession) -> None:
    task = numbers.table("nums").withColumn("double", fragile("id"))
    for strategy in ("rerun", "fm"):
        with pytest.raises(UDFError, match=r"fragile.*ValueError: unlucky input.*\(13,\)") as info:
            numbers.run(task, strategy=strategy)
        _no_jvm_noise(info.value)
    runs_dir = numbers.store.path("runs")
    assert numbers.store.list_dirs(runs_dir) == []  # no run and no staging left behind
    ok = numbers.run(numbers.table("nums").filter("id < 13").withColumn("double", fragile("id")))
    assert numbers.runs() == [ok.id]


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_store_not_writable(spark: SparkSession, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    with pytest.raises(StoreError, match="not writable"):
        LineageSession(spark, store=str(locked / "store"))


def test_store_path_that_is_a_file(spark: SparkSession, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="not writable") as info:
        LineageSession(spark, store=str(blocker / "store"))
    _no_jvm_noise(info.value)


def test_map_typed_reason_is_refused(spark: SparkSession) -> None:
    from reasoning_udfs.spark_types import parse_type
    from reasoning_udfs.udf import check_reason_type

    with pytest.raises(TypeError, match="may not be a map"):
        check_reason_type("x", parse_type("struct<scores: map<string, double>>"))


def test_sort_below_the_top_is_named(numbers: LineageSession) -> None:
    inner = numbers.table("nums").orderBy("id").limit(5)
    with pytest.raises(UnsupportedTaskError, match=r"GlobalLimit.*at the top of a task.*row_number\(\)"):
        numbers.run(inner.groupBy("grp").count())


def test_a_source_alone_is_a_task(numbers: LineageSession) -> None:
    run = numbers.run(numbers.table("other"), strategy="rerun")
    lin = run.lineage(where="tag = 'b'")
    assert lin.source_ids("other") == {(2,)}

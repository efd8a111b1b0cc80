"""Sources read where they are: ``spark.read`` of Parquet and CSV, a catalog table and a temp
view are sources with no ``register_table``; the run fingerprints their files, a question
reads them in place (in process), and a file changed since the run is a one-line error.

One small retail job (customers CSV, orders Parquet in two files, reviews Parquet; a left
join, a model call, a join and a grouping) runs once in place and once over the same data
registered in the store: the two answers must name the same rows (checked in process and by
Spark, lazy and eager), and keyless rows must be found again at their file and position.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from materialization.fingerprints import SourceChangedError
from reasoning_udfs.text_rules import keyword_sentiment
from segmenter.errors import LineageError, UnknownSourceError
from segmenter.operators import Source
from segmenter.sources import ROW_SHIFT, local_file
from tests.browser import INTERNAL, first_screens
from tracing import LineageSession
from tracing.lineage import AugmentedLineage, collect_rows
from tracing.present.report import audit_report, write_text

ROOT = Path(__file__).resolve().parent.parent
WORDS = ["good great", "bad terrible", "poor", "excellent love", "broke bad"]
ASKED = "segment = 'enterprise' AND mood = 'Negative'"


def _files(folder: Path, spark: SparkSession) -> dict[str, pd.DataFrame]:
    customers = pd.DataFrame(
        {
            "customer_id": range(8),
            "name": [f"c{i}" for i in range(8)],
            "segment": ["enterprise" if i % 3 == 0 else "retail" for i in range(8)],
        }
    )
    orders = pd.DataFrame(
        {
            "order_id": range(20),
            "customer_id": [i % 7 for i in range(20)],
            "amount": [float(i * 7 % 13) for i in range(20)],
        }
    )
    reviews = pd.DataFrame(
        {"order_id": list(range(0, 20, 2)) + [1, 3], "text": [WORDS[i % 5] for i in range(12)]}
    )
    customers.to_csv(folder / "customers.csv", index=False)
    (folder / "orders").mkdir()
    orders.iloc[:11].to_parquet(folder / "orders" / "part-0.parquet", index=False)
    orders.iloc[11:].to_parquet(folder / "orders" / "part-1.parquet", index=False)
    reviews.to_parquet(folder / "reviews.parquet", index=False)
    return {"customers": customers, "orders": orders, "reviews": reviews}


def _task(customers: DataFrame, orders: DataFrame, reviews: DataFrame) -> DataFrame:
    scored = orders.join(reviews, "order_id", "left").withColumn("mood", keyword_sentiment("text"))
    return (
        customers.join(scored, "customer_id")
        .groupBy("segment", "mood")
        .agg(F.count(F.lit(1)).alias("n"), F.sum("amount").alias("amount"))
    )


def _read(spark: SparkSession, folder: Path) -> tuple[DataFrame, DataFrame, DataFrame]:
    customers = (
        spark.read.option("header", True).option("inferSchema", True).csv(str(folder / "customers.csv"))
    )
    return (
        customers,
        spark.read.parquet(str(folder / "orders")),
        spark.read.parquet(str(folder / "reviews.parquet")),
    )


@pytest.fixture(scope="module")
def retail(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("retail")
    frames = _files(folder, spark)
    als = LineageSession(spark, store=str(folder / "store"))
    in_place = als.run(_task(*_read(spark, folder)), keys={"customers": "customer_id"})
    registered = [
        als.register_table("reg_customers", frames["customers"], key="customer_id"),
        als.register_table("reg_orders", frames["orders"]),
        als.register_table("reg_reviews", frames["reviews"]),
    ]
    reference = als.run(_task(*registered))
    yield {"folder": folder, "als": als, "run": in_place, "reference": reference, "frames": frames}


def _rows(lin: Any, table: str, part: str = "source") -> set[tuple[Any, ...]]:
    """A table's lineage rows (``part``: source, contributing or control) by value: row ids
    differ between a file and its registration."""
    rows = getattr(lin, f"{part}_rows")(table)
    return {tuple(sorted((k, v) for k, v in r.items() if k != "_rid")) for r in rows}


def test_files_read_in_place_give_the_registered_answer(retail: dict[str, Any]) -> None:
    run, reference = retail["run"], retail["reference"]
    found = {s.table: s for s in run.task.root.walk() if isinstance(s, Source)}
    assert sorted(found) == ["customers", "orders", "reviews"]
    assert [local_file(p) for p in found["orders"].files.paths] == [  # type: ignore[union-attr]
        str(retail["folder"] / "orders" / f"part-{i}.parquet") for i in (0, 1)
    ]
    assert found["orders"].key_names == ("_rid",) and found["customers"].key_names == ("customer_id",)
    assert not found["orders"].in_store and found["customers"].in_store  # CSV: Spark's parse, copied once
    printed = {e["table"]: e for e in run.record["read_in_place"]}
    assert [f["rows"] for f in printed["orders"]["files"]] == [11, 9]
    assert printed["customers"]["digest_of"] == "content" and not printed["customers"]["copy"]

    want = reference.lineage(where=ASKED)
    assert want.engine == "in-process"
    for engine in ("in-process", "spark"):
        got = run.lineage(where=ASKED, engine=engine)
        assert got.engine == engine
        for table in ("customers", "orders", "reviews"):
            for part in ("source", "contributing", "control"):
                assert _rows(got, table, part) == _rows(want, f"reg_{table}", part), (engine, table, part)
            assert got.source_ids(table) == run.lineage(where=ASKED).source_ids(table)
        assert len(got.reasoning_rows("keyword_sentiment")) == len(want.reasoning_rows("keyword_sentiment"))
    assert _rows(want, "reg_reviews") and _rows(want, "reg_orders")  # the question reaches every table

    event = run.openlineage()  # a catalog sees the user's files, versioned by their fingerprint
    inputs = {(i["namespace"], i["name"]): i for i in event["inputs"]}
    orders_at = ("file", str(retail["folder"] / "orders"))
    assert set(inputs) == {
        orders_at,
        ("file", str(retail["folder"] / "reviews.parquet")),
        ("file", str(retail["folder"] / "customers.csv")),
    }
    assert inputs[orders_at]["facets"]["symlinks"]["identifiers"][0]["name"] == "orders"  # the task's name
    assert [f["name"] for f in inputs[orders_at]["facets"]["schema"]["fields"]] == [
        "order_id",
        "customer_id",
        "amount",
    ]
    read = {
        (f["namespace"], f["name"])
        for c in event["outputs"][0]["facets"]["columnLineage"]["fields"].values()
        for f in c["inputFields"]
    }
    assert orders_at in read

    later = retail["als"].load_run(run.id).lineage(where=ASKED)  # a later process: the record alone
    assert later.source_ids("orders") == run.lineage(where=ASKED).source_ids("orders")


def test_an_outer_joins_matched_side_is_control_lineage(retail: dict[str, Any], tmp_path: Path) -> None:
    """A group's contributing orders and reviews are exactly its customers' (those with the
    group's mood); the orders with a review that an unreviewed order was checked against (the
    left join's NULL-padded rows) are control rows, apart."""
    segments = retail["run"].segments().splitlines()  # the left join: one step, no copy of orders
    assert len(segments) == 3 and "[Outer] ⟕-π-π  <- table orders, table reviews" in segments[2]
    frames = retail["frames"]
    texts = dict(zip(frames["reviews"]["order_id"], frames["reviews"]["text"]))
    enterprise = set(frames["customers"].query("segment == 'enterprise'")["customer_id"])
    for mood in ("Negative", "Positive"):  # an unreviewed order's mood is Positive: padded rows
        lin = retail["run"].lineage(where=f"segment = 'enterprise' AND mood = '{mood}'")
        group = {
            o: c
            for o, c in zip(frames["orders"]["order_id"], frames["orders"]["customer_id"])
            if c in enterprise and keyword_sentiment.main(texts.get(o)) == mood
        }
        assert {r["customer_id"] for r in lin.contributing_rows("customers")} == set(group.values())
        orders = lin.contributing_rows("orders")
        assert {r["order_id"] for r in orders} == set(group)
        assert {r["order_id"] for r in lin.contributing_rows("reviews")} == set(group) & set(texts)
        padded = set(group) - set(texts)
        for table in ("orders", "reviews"):
            checked, used = lin.control_rows(table), lin.contributing_rows(table)
            assert bool(checked) == bool(padded), (mood, table)  # only a padded row checks
            assert not {r["_rid"] for r in checked} & {r["_rid"] for r in used}
            assert len(checked) + len(used) == len(lin.source_rows(table))
        if padded:  # what it was checked against: every order with a review (T₁ ⋉ T₂)
            assert {r["order_id"] for r in lin.source_rows("orders")} == set(group) | set(texts)
            assert lin.checks("orders") == ["the left outer join of orders and reviews"]  # the run's words
            assert "only checked, by the left outer join" in str(lin)
            data = lin.to_dict()
            assert data["control_lineage"]["reviews"]["rows"] == len(lin.control_rows("reviews"))
            assert data["rows"][0]["contributing"]["orders"] == orders
    for answer in (lin, retail["run"].lineage()):  # kept per row; every output row, merged
        _check_arrow_parts(answer, tmp_path / f"answer-{answer.targets is None}")


def _check_arrow_parts(lin: AugmentedLineage, folder: Path) -> None:
    """The answer's Arrow and Parquet forms hold the same contributing and control rows as
    its Python rows, told apart in Arrow."""
    counts = lin.to_parquet(str(folder))
    assert set(counts) == set(lin.source)
    for table in lin.source:
        written = pq.read_table(folder / f"{table}.parquet")
        for part, rows in zip(("contributing", "control"), lin.split(table), strict=True):
            arrow = lin.to_arrow(table, part)
            assert sorted(map(str, arrow.to_pylist())) == sorted(map(str, rows)), (table, part)
            assert counts[table][part] == len(rows) == pc.sum(pc.equal(written["lineage"], part)).as_py()
    with pytest.raises(ValueError, match="part must be one of all, contributing, control"):
        lin.to_arrow("orders", "checked")
    held = sum(sum(c.values()) for c in counts.values())
    try:  # the JSON lists them merged, and each chosen row's own
        own = sum(sum(one.part_counts(t)) for one in lin.rows for t in one.tables)
    except LineageError:  # an answer not kept row by row
        own = 0
    bound = f"lists {held + own:,} source rows \\({held:,} and each chosen row's own\\), more than its JSON"
    with pytest.raises(LineageError, match=bound):
        lin.to_json(max_rows=5)  # listed up to a bound; beyond it, Parquet


def test_a_keyless_row_is_named_by_its_file_and_position(retail: dict[str, Any]) -> None:
    run = retail["run"]
    lin = run.lineage(where=ASKED)
    orders = next(s for s in run.task.root.walk() if isinstance(s, Source) and s.table == "orders")
    files = [pq.read_table(local_file(p)).to_pylist() for p in orders.files.paths]  # type: ignore[union-attr,arg-type]
    rows = lin.source_rows("orders")
    assert rows
    for row in rows:
        at = files[row["_rid"] >> ROW_SHIFT][row["_rid"] & ((1 << ROW_SHIFT) - 1)]
        assert at == {k: v for k, v in row.items() if k != "_rid"}


def test_an_eager_run_over_files_answers_the_same(retail: dict[str, Any], spark: SparkSession) -> None:
    eager = retail["als"].run(
        _task(*_read(spark, retail["folder"])), keys={"customers": "customer_id"}, backend="eager"
    )
    want = retail["run"].lineage(where=ASKED)
    got = eager.lineage(where=ASKED)
    for table in ("customers", "orders", "reviews"):
        assert got.source_ids(table) == want.source_ids(table), table
    # forward questions read the files too, and say how each output row depends on a row: its
    # values (contributing) or only its absence checked; the inverse of the backward split
    every = eager.lineage()
    seen = set()
    for rid in sorted({r["_rid"] for r in every.source_rows("reviews")}):
        found = eager.forward(table="reviews", ids=[rid]).rows()
        kinds = {(r["segment"], r["mood"]): r["dependence"] for r in found}
        seen |= set(kinds.values())
        for one in every.rows:
            (row,) = collect_rows(one.targets)
            key = (row["segment"], row["mood"])
            used = rid in {r["_rid"] for r in one.contributing_rows("reviews")}
            checked = rid in {r["_rid"] for r in one.control_rows("reviews")}
            assert kinds.get(key) == ("contributing" if used else "control" if checked else None), (rid, key)
    assert seen == {"contributing", "control"}


def test_a_changed_or_missing_file_is_a_one_line_error(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "events.parquet"
    pd.DataFrame({"k": [1, 2, 3], "v": ["a", "b", "a"]}).to_parquet(path, index=False)
    als = LineageSession(spark, store=str(tmp_path / "store"))

    def task() -> DataFrame:
        return spark.read.parquet(str(path)).groupBy("v").count()

    run, copied = als.run(task()), als.run(task(), snapshot="copy")
    assert run.lineage(where="v = 'a'").source_ids("events")
    os.utime(path, ns=(1, 1))  # touched, not changed: the digest still matches
    assert len(run.lineage(where="v = 'a'").source_rows("events")) == 2

    pd.DataFrame({"k": [1, 2, 3], "v": ["a", "a", "a"]}).to_parquet(path, index=False)
    with pytest.raises(SourceChangedError) as changed:
        run.lineage(where="v = 'a'")
    message = str(changed.value)
    assert "\n" not in message and str(path) in message and run.id in message and "snapshot='copy'" in message
    assert len(copied.lineage(where="v = 'a'").source_rows("events")) == 2  # its own copy: as it was

    path.unlink()
    with pytest.raises(SourceChangedError, match="is gone"):
        als.load_run(run.id).lineage(where="v = 'a'")


def test_catalog_tables_views_and_globs_keep_the_users_names(spark: SparkSession, tmp_path: Path) -> None:
    pd.DataFrame({"k": [1, 2], "v": ["x", "y"]}).to_parquet(tmp_path / "a.parquet", index=False)
    pd.DataFrame({"k": [3], "v": ["z"]}).to_parquet(tmp_path / "b.parquet", index=False)
    als = LineageSession(spark, store=str(tmp_path / "store"))
    spark.read.parquet(str(tmp_path / "a.parquet")).write.option("path", str(tmp_path / "tbl")).saveAsTable(
        "in_place_items"
    )
    try:
        spark.read.parquet(str(tmp_path / "*.parquet")).createOrReplaceTempView("my_events")
        task = spark.sql("SELECT e.v, i.k FROM my_events e JOIN in_place_items i ON e.k = i.k")
        tables = {
            s.table: s for s in als.parse(task, keys={"my_events": "k"}).root.walk() if isinstance(s, Source)
        }
        assert sorted(tables) == ["in_place_items", "my_events"]
        assert len(tables["my_events"].files.paths) == 2 and tables["my_events"].key_names == ("k",)  # type: ignore[union-attr]
        with pytest.raises(UnknownSourceError, match=r"keys= names \['nope'\]"):
            als.parse(task, keys={"nope": "k"})
        with pytest.raises(UnknownSourceError, match="no key column"):
            als.parse(task, keys={"my_events": "id"})
        parted = tmp_path / "parted"  # a partitioned folder: its k comes from the paths
        spark.read.parquet(str(tmp_path / "*.parquet")).write.partitionBy("k").parquet(str(parted))
        run = als.run(spark.read.parquet(str(parted)).groupBy("k").count())
        (source,) = [s for s in run.task.root.walk() if isinstance(s, Source)]
        assert source.in_store and dict(source.files.options)["basepath"].endswith("parted")  # type: ignore[union-attr]
        lin = run.lineage(where="k = 3")
        assert lin.engine == "in-process" and [r["v"] for r in lin.source_rows("parted")] == ["z"]
    finally:
        spark.sql("DROP TABLE IF EXISTS in_place_items")
        spark.catalog.dropTempView("my_events")


def test_the_own_job_example_runs_as_written(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/own_job.py, as the README shows it: plain spark.read, a left join, a window."""
    example = importlib.util.spec_from_file_location("own_job", ROOT / "examples" / "own_job.py")
    assert example is not None and example.loader is not None
    own_job = importlib.util.module_from_spec(example)
    example.loader.exec_module(own_job)
    own_job.main(tmp_path / "data", str(tmp_path / "store"))
    printed = capsys.readouterr().out
    assert f"orders: 10 row(s) of {tmp_path / 'data' / 'orders'} (parquet, 2 file(s))" in printed
    assert "    + 33 row(s) only checked, by the left outer join" in printed  # the left join's matched side
    assert "[part-0.parquet row 4]" in printed and printed.rstrip().endswith("in-process")
    als = LineageSession(spark, store=str(tmp_path / "store"))  # its audit report, as al report writes it
    (run_id,) = als.runs()
    run = als.load_run(run_id)
    asked = "segment = 'enterprise'"
    rows = run.lineage(where=asked).rows  # each mood's row apart: in process
    page = write_text(audit_report(run, rows, run.models, asked), tmp_path / "own-job-report.html")
    html = page.read_text()
    assert "those where <code>segment = &#39;enterprise&#39;</code>" in html
    assert len(rows) > 1 and not INTERNAL.search(html), INTERNAL.search(html)  # the user's names only
    assert "the left outer join of orders and reviews: they gave no value" in html  # control rows, counted
    assert "mood = keyword_sentiment(text)" in html and "<th>file</th><th>row</th>" in html
    assert "read: orders part-0.parquet rows " in html  # what a call read, by file and row too
    first_screens(page, ROOT / "test-artifacts")

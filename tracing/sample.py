"""``sample=k, seed=s``: output rows drawn as places in the stored output, the same rows
whichever engine or backend answers.

The draw orders the stored output's rows by a hash of ``s`` and each row's identifying
values (ties in file order) and keeps the first ``k`` as places: (file name, row index in
the file). Every way of choosing then reads those places (DuckDB by ``filename`` and
``file_row_number``, Spark by ``_metadata.file_name`` and ``_metadata.row_index``), so the
engines agree and equal rows stay a bag: two of three equal rows drawn are two targets.
Values, not file order, decide which rows come first, so runs of one task under other
strategies, whose files hold the rows in another order, draw the same rows. A local store
draws in process (DuckDB), with no JVM; another by Spark (its ``xxhash64``).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from materialization import duck
from materialization.compile import read_columns, ref
from materialization.duck_expressions import register_functions
from materialization.duck_plan import quoted
from materialization.locations import local_path, parquet_scan
from materialization.spark import SparkOf

FILE = "__file"  # the drawn places: a Parquet file's name ...
ROW = "__row"  # ... and a row's index in it

Columns = Sequence[tuple[str, str]]  # (column id, Spark type)


def draw(uri: str, match: Columns, k: int, seed: int, spark_of: SparkOf) -> pa.Table | None:
    """The places (``FILE``, ``ROW``) of the ``k`` rows of the Parquet folder ``uri`` first
    by a hash of ``seed`` and their ``match`` columns; None where ``k`` covers every row."""
    path = local_path(uri)
    if path is None:
        placed = read_columns(spark_of(), uri, match).select(
            F.col("_metadata.file_name").alias(FILE),
            F.col("_metadata.row_index").alias(ROW),
            F.xxhash64(F.lit(seed), *[ref(c) for c, _ in match]).alias("__hash"),
        )
        places = placed.orderBy("__hash", FILE, ROW).limit(k).select(FILE, ROW).toArrow()
    else:
        hashed = ", ".join(quoted(c) for c, _ in match)
        sql = (
            f"SELECT parse_filename(filename) AS {FILE}, file_row_number AS {ROW} FROM {parquet_scan(path)} "
            f"ORDER BY hash({int(seed)}, {hashed}), filename, file_row_number LIMIT {int(k)}"
        )
        con = duck.cursor("questions", register_functions)
        try:
            places = con.sql(sql).to_arrow_table()
        finally:
            con.close()
    return places if places.num_rows == k else None  # fewer: every row was drawn


def in_duck(folder: str, select: str, places: str) -> str:
    """DuckDB SQL of the ``select`` columns (over alias ``t``) of the rows at ``places`` (a
    relation of ``FILE``, ``ROW``) in the local Parquet ``folder``, each row once."""
    on = f"parse_filename(t.filename) = p.{FILE} AND t.file_row_number = p.{ROW}"
    return f"SELECT {select} FROM {parquet_scan(folder)} t SEMI JOIN ({places}) p ON {on}"


def in_spark(spark_of: SparkOf, uri: str, cols: Columns, places: pa.Table) -> DataFrame:
    """The ``cols`` of the rows at ``places`` in the Parquet folder ``uri``, chosen by Spark."""
    spark = spark_of()
    placed = read_columns(spark, uri, cols).select(
        *[ref(c) for c, _ in cols],
        F.col("_metadata.file_name").alias(FILE),
        F.col("_metadata.row_index").alias(ROW),
    )
    given = F.broadcast(spark.createDataFrame(places))
    return placed.join(given, [FILE, ROW], "left_semi").select(*[ref(c) for c, _ in cols])

"""Evaluate an intermediate answer once so later steps reuse it instead of recomputing it.

Lineage answers are usually small: up to ``SMALL_ROWS`` rows are collected as Arrow (one
Spark job) and handed back as a local relation (exact statistics, and no shuffle where a
later step takes its distinct rows, as a DataFrame made from Python rows, an RDD, needed);
larger ones are checkpointed on the executors.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame

SMALL_ROWS = 20_000


def settle(df: DataFrame, small_rows: int = SMALL_ROWS) -> tuple[DataFrame, int, pa.Table | None]:
    """``df`` evaluated, its row count, and its rows (Arrow) when they were small enough to
    collect."""
    rows = df.limit(small_rows + 1).toArrow()
    if rows.num_rows <= small_rows:
        return local_frame(df, rows), rows.num_rows, rows
    checkpointed = df.localCheckpoint()
    return checkpointed, checkpointed.count(), None


def local_frame(like: DataFrame, rows: pa.Table) -> DataFrame:
    """``rows`` (Arrow, with ``like``'s columns) as a Spark local relation of ``like``'s schema."""
    return like.sparkSession.createDataFrame(rows, schema=like.schema)

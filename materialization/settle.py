"""Evaluate an intermediate answer once so later steps reuse it instead of recomputing it.

Lineage answers are usually small: up to ``SMALL_ROWS`` rows are collected into a local
relation (one Spark job, exact statistics, broadcast in later joins); larger ones are
checkpointed on the executors.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Row

SMALL_ROWS = 20_000


def settle(df: DataFrame, small_rows: int = SMALL_ROWS) -> tuple[DataFrame, int, list[Row] | None]:
    """``df`` evaluated, its row count, and its rows when they were small enough to collect."""
    rows = df.limit(small_rows + 1).collect()
    if len(rows) <= small_rows:
        return df.sparkSession.createDataFrame(rows, df.schema), len(rows), rows
    checkpointed = df.localCheckpoint()
    return checkpointed, checkpointed.count(), None

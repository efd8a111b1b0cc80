"""Your own job, as you would write it: files read with ``spark.read`` (no registration), a
left join, a window and a model, then the lineage of one output row.

    .venv/bin/python examples/own_job.py [folder]

writes a small retail data set into ``folder`` (default ``al_own_job``) the first time:
customers (CSV), orders (Parquet, two files) and reviews (Parquet).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from reasoning_udfs.text_rules import keyword_sentiment
from tracing import LineageSession

REVIEWS = ["good, great value", "bad and terrible", "poor fit", "excellent, love it", "broke at once, bad"]


def write_files(folder: Path) -> None:
    """customers.csv (20 rows), orders/ (60 rows in two Parquet files), reviews.parquet (40)."""
    folder.mkdir(parents=True, exist_ok=True)
    customers = pd.DataFrame({
        "customer_id": range(20),
        "name": [f"customer {i}" for i in range(20)],
        "segment": ["enterprise" if i % 4 == 0 else "retail" for i in range(20)],
    })
    customers.to_csv(folder / "customers.csv", index=False)
    orders = pd.DataFrame({
        "order_id": range(60),
        "customer_id": [i % 19 for i in range(60)],
        "amount_cents": [(i * 3737) % 10_100 for i in range(60)],
    })
    (folder / "orders").mkdir(exist_ok=True)
    orders.iloc[:30].to_parquet(folder / "orders" / "part-0.parquet", index=False)
    orders.iloc[30:].to_parquet(folder / "orders" / "part-1.parquet", index=False)
    reviewed = [*range(0, 60, 3), *range(1, 60, 3)]
    reviews = pd.DataFrame({"order_id": reviewed, "text": [REVIEWS[i % 5] for i in range(40)]})
    reviews.to_parquet(folder / "reviews.parquet", index=False)


def job(spark: SparkSession, folder: Path) -> DataFrame:
    """Each customer's three largest orders with the mood of their review, counted by segment."""
    customers = spark.read.csv(str(folder / "customers.csv"), header=True, inferSchema=True)
    orders = spark.read.parquet(str(folder / "orders"))
    reviews = spark.read.parquet(str(folder / "reviews.parquet"))
    largest = Window.partitionBy("customer_id").orderBy(F.desc("amount_cents"), "order_id")
    top = (
        orders.join(reviews, "order_id", "left")  # an order without a review keeps text NULL
        .withColumn("rank", F.row_number().over(largest))
        .filter(F.col("rank") <= 3)
        .withColumn("mood", keyword_sentiment("text"))
    )
    counted = F.count(F.lit(1)).alias("orders")
    return customers.join(top, "customer_id").groupBy("segment", "mood").agg(counted)


def main(folder: Path, store: str = "al_store") -> None:
    if not (folder / "reviews.parquet").exists():
        write_files(folder)
    als = LineageSession(store=store)  # local Spark unless a session is already active
    run = als.run(job(als.spark, folder), keys={"customers": "customer_id"})  # orders, reviews: file + row
    run.output.show()
    lineage = run.lineage(where="segment = 'enterprise' AND mood = 'Negative'")
    print(lineage)  # each source row with its file and position; the reviews the model read
    print(lineage.engine)  # in-process: DuckDB over your files, no Spark job


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "al_own_job"))

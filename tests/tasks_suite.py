"""A tiny, deterministic TPC-H-like database and a suite of named lineage tasks.

Used by the differential tests (every task under rerun, full and fm must give the same output
and the same augmented lineage) and by the cluster tests. Not a test module itself.

The data keep TPC-H's table and column names and primary keys, a few dozen to a few hundred
rows per table, with duplicated values in grouping columns, customers without orders, and
orders whose ``o_custkey`` is NULL (a joinable non-key column). ``p_image`` holds image paths
(some showing a person) and ``l_comment`` short review-like texts.

The reasoning UDFs are defined here at module level so that Spark's Python workers can import
them by module path (``tests.tasks_suite``); their names carry a ``suite_`` prefix so they
never collide with UDFs other test modules register.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cda_workload.workloads.loan_example import loan_task, register_loan_tables
from reasoning_udfs import ReasoningUDF
from reasoning_udfs.loan_rules import credit_rules
from tracing import LineageSession

SEED = 20240611

# --- reasoning UDFs ---------------------------------------------------------------------------

POSITIVE_WORDS = ("great", "excellent", "good", "love", "fast", "perfect")
NEGATIVE_WORDS = ("bad", "broken", "late", "poor", "terrible", "damaged")


class SuiteSentiment(ReasoningUDF):
    """Rule-based sentiment of a review text; the reason lists the words that decided."""

    name = "suite_sentiment"
    value_type = "string"
    reason_type = "struct<words: array<string>>"

    def main(self, text: str | None) -> str:
        return self.main_with_reason(text)[0]

    def main_with_reason(self, text: str | None) -> tuple[str, dict[str, Any]]:
        words = [w.strip(".,!?") for w in (text or "").lower().split()]
        pos = sorted({w for w in words if w in POSITIVE_WORDS})
        neg = sorted({w for w in words if w in NEGATIVE_WORDS})
        if len(pos) > len(neg):
            return "Positive", {"words": pos}
        return "Negative", {"words": neg}


class SuitePriceBand(ReasoningUDF):
    """Price band of an amount; the reason gives the threshold it was compared with."""

    name = "suite_price_band"
    value_type = "string"
    reason_type = "struct<amount: double, threshold: double>"

    LOW, HIGH = 20000.0, 60000.0

    def main(self, amount: Any) -> str:
        return self.main_with_reason(amount)[0]

    def main_with_reason(self, amount: Any) -> tuple[str, dict[str, Any]]:
        if amount is None:
            return "unknown", {"amount": None, "threshold": None}
        value = float(amount)
        if value < self.LOW:
            return "low", {"amount": value, "threshold": self.LOW}
        if value < self.HIGH:
            return "mid", {"amount": value, "threshold": self.HIGH}
        return "high", {"amount": value, "threshold": self.HIGH}


class SuitePersonImage(ReasoningUDF):
    """Pretend person detector on an image path; the reason names the cue and a score."""

    name = "suite_person_image"
    value_type = "boolean"
    reason_type = "struct<cue: string, score: double>"

    def main(self, path: str | None) -> bool:
        return self.main_with_reason(path)[0]

    def main_with_reason(self, path: str | None) -> tuple[bool, dict[str, Any]]:
        stem = (path or "").rsplit("/", 1)[-1]
        if "person" in stem:
            return True, {"cue": "person", "score": 0.9}
        return False, {"cue": "none", "score": round(0.05 * (len(stem) % 7), 2)}


class SuiteOpinionWords(ReasoningUDF):
    """Pretend detector that returns a list (one entry per opinion word found, like boxes
    of a person detector); the reason gives each word's position in the text."""

    name = "suite_opinion_words"
    value_type = "array<string>"
    reason_type = "struct<positions: array<int>>"

    def main(self, text: str | None) -> list[str]:
        return self.main_with_reason(text)[0]

    def main_with_reason(self, text: str | None) -> tuple[list[str], dict[str, Any]]:
        words = [w.strip(".,!?") for w in (text or "").lower().split()]
        found = [(i, w) for i, w in enumerate(words) if w in POSITIVE_WORDS + NEGATIVE_WORDS]
        return [w for _, w in found], {"positions": [i for i, _ in found]}


suite_sentiment = SuiteSentiment()
suite_price_band = SuitePriceBand()
suite_person_image = SuitePersonImage()
suite_opinion_words = SuiteOpinionWords()
SUITE_UDFS = (suite_sentiment, suite_price_band, suite_person_image, suite_opinion_words)


# --- data -------------------------------------------------------------------------------------

SCHEMAS = {
    "region": "r_regionkey int, r_name string, r_comment string",
    "nation": "n_nationkey int, n_name string, n_regionkey int, n_comment string",
    "supplier": (
        "s_suppkey int, s_name string, s_address string, s_nationkey int, s_phone string, "
        "s_acctbal decimal(15,2), s_comment string"
    ),
    "customer": (
        "c_custkey int, c_name string, c_address string, c_nationkey int, c_phone string, "
        "c_acctbal decimal(15,2), c_mktsegment string, c_comment string"
    ),
    "part": (
        "p_partkey int, p_name string, p_mfgr string, p_brand string, p_type string, p_size int, "
        "p_container string, p_retailprice decimal(15,2), p_comment string, p_image string"
    ),
    "partsupp": (
        "ps_partkey int, ps_suppkey int, ps_availqty int, ps_supplycost decimal(15,2), ps_comment string"
    ),
    "orders": (
        "o_orderkey int, o_custkey int, o_orderstatus string, o_totalprice decimal(15,2), "
        "o_orderdate date, o_orderpriority string, o_clerk string, o_shippriority int, o_comment string"
    ),
    "lineitem": (
        "l_orderkey int, l_partkey int, l_suppkey int, l_linenumber int, l_quantity decimal(15,2), "
        "l_extendedprice decimal(15,2), l_discount decimal(15,2), l_tax decimal(15,2), "
        "l_returnflag string, l_linestatus string, l_shipdate date, l_commitdate date, "
        "l_receiptdate date, l_shipinstruct string, l_shipmode string, l_comment string"
    ),
}
KEYS: dict[str, str | list[str]] = {
    "region": "r_regionkey",
    "nation": "n_nationkey",
    "supplier": "s_suppkey",
    "customer": "c_custkey",
    "part": "p_partkey",
    "partsupp": ["ps_partkey", "ps_suppkey"],
    "orders": "o_orderkey",
    "lineitem": ["l_orderkey", "l_linenumber"],
}
TABLES = tuple(SCHEMAS)

REGIONS = ("AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST")
NATIONS = (
    ("ALGERIA", 0), ("ARGENTINA", 1), ("BRAZIL", 1), ("CANADA", 1), ("EGYPT", 4),
    ("ETHIOPIA", 0), ("FRANCE", 3), ("GERMANY", 3), ("INDIA", 2), ("INDONESIA", 2),
    ("IRAN", 4), ("IRAQ", 4), ("JAPAN", 2), ("JORDAN", 4), ("KENYA", 0),
    ("MOROCCO", 0), ("MOZAMBIQUE", 0), ("PERU", 1), ("CHINA", 2), ("ROMANIA", 3),
    ("SAUDI ARABIA", 4), ("VIETNAM", 2), ("RUSSIA", 3), ("UNITED KINGDOM", 3), ("UNITED STATES", 1),
)  # fmt: skip
SEGMENTS = ("AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD", "MACHINERY")
PRIORITIES = ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW")
SHIPMODES = ("AIR", "FOB", "MAIL", "RAIL", "SHIP", "TRUCK")
INSTRUCTS = ("COLLECT COD", "DELIVER IN PERSON", "NONE", "TAKE BACK RETURN")
COLORS = ("almond", "azure", "blush", "chocolate", "forest", "ivory", "lime", "navy", "peru", "smoke")
TYPES = ("ECONOMY ANODIZED STEEL", "LARGE BRUSHED BRASS", "PROMO BURNISHED COPPER", "STANDARD POLISHED TIN")
CONTAINERS = ("SM BOX", "MED BAG", "LG CASE", "JUMBO PKG")
REVIEWS = (
    "great product, fast delivery",
    "arrived late and damaged",
    "good value, would love another",
    "poor packaging, box broken",
    "excellent quality, perfect fit",
    "okay I guess",
    "terrible service, late again",
    "good but a bit late",
    "love it",
    "bad smell, poor finish",
    "fast shipping, great seller, good price",
    "nothing special",
)

N_CUSTOMERS, N_CUSTOMERS_WITH_ORDERS = 40, 30
N_SUPPLIERS, N_PARTS, N_ORDERS = 12, 30, 80
START = date(1995, 1, 1)


def _money(rng: random.Random, low: int, high: int) -> Decimal:
    return Decimal(rng.randint(low * 100, high * 100)) / 100


def generate(seed: int = SEED) -> dict[str, pd.DataFrame]:
    """The suite's tables as pandas DataFrames (object columns, so NULLs stay None)."""
    rng = random.Random(seed)
    rows: dict[str, list[tuple]] = {}
    rows["region"] = [(i, name, f"region {name.lower()}") for i, name in enumerate(REGIONS)]
    rows["nation"] = [(i, n, r, f"nation {i}") for i, (n, r) in enumerate(NATIONS)]
    acctbals = [_money(rng, -500, 9000) for _ in range(8)]  # few values: duplicates on purpose
    rows["supplier"] = [
        (
            k,
            f"Supplier#{k:09d}",
            f"addr s{k}",
            None if k == N_SUPPLIERS else rng.randrange(len(NATIONS)),  # one NULL nation
            f"{10 + k}-555-{k:04d}",
            rng.choice(acctbals),
            rng.choice(REVIEWS),
        )
        for k in range(1, N_SUPPLIERS + 1)
    ]
    rows["customer"] = [
        (
            k,
            f"Customer#{k:09d}",
            f"addr c{k}",
            rng.randrange(len(NATIONS)),
            f"{20 + k % 5}-444-{k:04d}",
            rng.choice(acctbals),
            rng.choice(SEGMENTS),
            rng.choice(REVIEWS),
        )
        for k in range(1, N_CUSTOMERS + 1)
    ]
    parts = []
    for k in range(1, N_PARTS + 1):
        name = " ".join(rng.sample(COLORS, 2))
        person = k % 4 == 1 or k % 7 == 0
        image = f"images/part_{k:03d}{'_with_person' if person else ''}.jpg"
        parts.append(
            (
                k,
                name,
                f"Manufacturer#{1 + k % 5}",
                f"Brand#{1 + k % 5}{1 + k % 3}",
                rng.choice(TYPES),
                rng.choice((1, 5, 10, 15, 20)),
                rng.choice(CONTAINERS),
                _money(rng, 900, 2000),
                rng.choice(REVIEWS),
                image,
            )
        )
    rows["part"] = parts
    suppliers_of = {p: sorted(rng.sample(range(1, N_SUPPLIERS + 1), 2)) for p in range(1, N_PARTS + 1)}
    rows["partsupp"] = [
        (p, s, rng.randint(1, 9999), _money(rng, 1, 1000), f"ps {p}-{s}")
        for p in range(1, N_PARTS + 1)
        for s in suppliers_of[p]
    ]
    retail = {p[0]: p[7] for p in parts}
    orders, lines = [], []
    for k in range(1, N_ORDERS + 1):
        custkey = None if k % 13 == 0 else rng.randint(1, N_CUSTOMERS_WITH_ORDERS)
        orderdate = START + timedelta(days=rng.randrange(3 * 365))
        total = Decimal(0)
        for n in range(1, rng.randint(1, 5) + 1):
            partkey = rng.randint(1, N_PARTS)
            quantity = Decimal(rng.randint(1, 50))
            price = quantity * retail[partkey]
            discount = Decimal(rng.randint(0, 10)) / 100
            tax = Decimal(rng.randint(0, 8)) / 100
            ship = orderdate + timedelta(days=rng.randint(1, 120))
            lines.append(
                (
                    k,
                    partkey,
                    rng.choice(suppliers_of[partkey]),
                    n,
                    quantity,
                    price,
                    discount,
                    tax,
                    rng.choice("RAN"),
                    "F" if ship < date(1997, 1, 1) else "O",
                    ship,
                    orderdate + timedelta(days=rng.randint(30, 90)),
                    ship + timedelta(days=rng.randint(1, 30)),
                    rng.choice(INSTRUCTS),
                    rng.choice(SHIPMODES),
                    rng.choice(REVIEWS),
                )
            )
            total += price * (1 - discount) * (1 + tax)
        orders.append(
            (
                k,
                custkey,
                rng.choice("FOP"),
                total.quantize(Decimal("0.01")),
                orderdate,
                rng.choice(PRIORITIES),
                f"Clerk#{rng.randint(1, 5):09d}",
                0,
                rng.choice(REVIEWS),
            )
        )
    rows["orders"], rows["lineitem"] = orders, lines
    return {name: pd.DataFrame(rows[name], columns=column_names(name), dtype=object) for name in TABLES}


def column_names(table: str) -> list[str]:
    return [part.strip().split()[0] for part in SCHEMAS[table].split(", ") if part.strip()[0].isalpha()]


def register_suite_tables(
    als: LineageSession, seed: int = SEED, tables: Iterable[str] = TABLES, loan: bool = True
) -> dict[str, pd.DataFrame]:
    """Register the TPC-H-like ``tables`` (with their primary keys) and, with ``loan``, the
    loan example's three tables; make the UDFs callable from SQL. Returns the pandas data."""
    data = {name: pdf for name, pdf in generate(seed).items() if name in set(tables)}
    for name, pdf in data.items():
        df = als.spark.createDataFrame(pdf, schema=SCHEMAS[name])
        als.register_table(name, df, key=KEYS[name])
    if loan:
        register_loan_tables(als)
    register_udfs(als)
    return data


def register_udfs(als: LineageSession) -> None:
    for udf in (*SUITE_UDFS, credit_rules):
        udf.register(als.spark)


# --- tasks ------------------------------------------------------------------------------------

TaskFn = Callable[[LineageSession], DataFrame | str]


@dataclass(frozen=True)
class SuiteTask:
    id: str
    build: TaskFn
    doc: str
    bug: str | None = None  # a known engine bug makes this task fail (tests mark it xfail)


TASKS: list[SuiteTask] = []


def task(fn: TaskFn | None = None, *, bug: str | None = None) -> Any:
    """Add ``fn`` to :data:`TASKS` under its name; ``bug`` records a known engine failure."""

    def add(f: TaskFn) -> TaskFn:
        TASKS.append(SuiteTask(f.__name__, f, (f.__doc__ or "").strip(), bug))
        return f

    return add(fn) if fn is not None else add


def _t(als: LineageSession, *names: str) -> list[DataFrame]:
    return [als.table(n) for n in names]


@task
def q3_shipping_priority(als: LineageSession) -> DataFrame:
    """TPC-H Q3 shape: customer ⋈ orders ⋈ lineitem, a UDF filter on the review text, revenue
    per order (σ_φ under α)."""
    customer, orders, lineitem = _t(als, "customer", "orders", "lineitem")
    joined = customer.join(orders, F.col("c_custkey") == F.col("o_custkey")).join(
        lineitem, F.col("l_orderkey") == F.col("o_orderkey")
    )
    picked = joined.filter(
        F.col("c_mktsegment").isin("BUILDING", "AUTOMOBILE", "MACHINERY")
        & (F.col("o_orderdate") < F.lit("1997-01-01").cast("date"))
        & (suite_sentiment("l_comment") == "Positive")
    )
    return picked.groupBy("l_orderkey", "o_orderdate", "o_shippriority").agg(
        F.sum(F.col("l_extendedprice") * (1 - F.col("l_discount"))).alias("revenue")
    )


@task
def q9_product_profit(als: LineageSession) -> DataFrame:
    """TPC-H Q9 shape: lineitem ⋈ partsupp (composite key) ⋈ part ⋈ supplier ⋈ nation, a
    boolean UDF filter on the part image, profit per nation and year (of the ship date, so
    that orders need not join too)."""
    part, supplier, lineitem, partsupp, nation = _t(als, "part", "supplier", "lineitem", "partsupp", "nation")
    joined = (
        lineitem.join(supplier, F.col("s_suppkey") == F.col("l_suppkey"))
        .join(
            partsupp,
            (F.col("ps_suppkey") == F.col("l_suppkey")) & (F.col("ps_partkey") == F.col("l_partkey")),
        )
        .join(part, F.col("p_partkey") == F.col("l_partkey"))
        .join(nation, F.col("s_nationkey") == F.col("n_nationkey"))
    )
    profit = joined.filter(suite_person_image("p_image")).select(
        F.col("n_name").alias("nation"),
        F.year("l_shipdate").alias("o_year"),
        (
            F.col("l_extendedprice") * (1 - F.col("l_discount"))
            - F.col("ps_supplycost") * F.col("l_quantity")
        ).alias("amount"),
    )
    return profit.groupBy("nation", "o_year").agg(F.sum("amount").alias("sum_profit"))


@task
def q10_returned_items(als: LineageSession) -> DataFrame:
    """TPC-H Q10 shape: returned lines with a negative review, revenue lost per customer."""
    customer, orders, lineitem, nation = _t(als, "customer", "orders", "lineitem", "nation")
    joined = (
        customer.join(orders, F.col("c_custkey") == F.col("o_custkey"))
        .join(lineitem, F.col("l_orderkey") == F.col("o_orderkey"))
        .join(nation, F.col("c_nationkey") == F.col("n_nationkey"))
    )
    returned = joined.filter((F.col("l_returnflag") == "R") & (suite_sentiment("l_comment") == "Negative"))
    return returned.groupBy("c_custkey", "c_name", "c_acctbal", "n_name").agg(
        F.sum(F.col("l_extendedprice") * (1 - F.col("l_discount"))).alias("revenue")
    )


@task
def q18_large_volume(als: LineageSession) -> DataFrame:
    """TPC-H Q18 shape: the IN subquery as a LEFT SEMI JOIN on an aggregated lineitem with a
    HAVING, a UDF filter on the order price, quantities per customer and order."""
    customer, orders, lineitem = _t(als, "customer", "orders", "lineitem")
    big = (
        lineitem.groupBy("l_orderkey")
        .agg(F.sum("l_quantity").alias("order_qty"))
        .filter(F.col("order_qty") > 80)
    )
    big_orders = orders.join(big, orders.o_orderkey == big.l_orderkey, "left_semi")
    joined = (
        customer.join(big_orders, F.col("c_custkey") == F.col("o_custkey"))
        .join(lineitem, F.col("o_orderkey") == F.col("l_orderkey"))
        .filter(suite_price_band("o_totalprice") != "low")
    )
    return joined.groupBy("c_name", "c_custkey", "o_orderkey", "o_orderdate", "o_totalprice").agg(
        F.sum("l_quantity").alias("total_qty")
    )


@task
def udf_projection_under_agg(als: LineageSession) -> DataFrame:
    """The paper's pattern α(φ(...)): a UDF in a projection feeding an aggregation."""
    (lineitem,) = _t(als, "lineitem")
    judged = lineitem.select("l_shipmode", "l_quantity", suite_sentiment("l_comment").alias("sentiment"))
    return judged.groupBy("sentiment", "l_shipmode").agg(
        F.count(F.lit(1)).alias("n"), F.sum("l_quantity").alias("qty")
    )


@task
def having_segments(als: LineageSession) -> DataFrame:
    """GROUP BY with HAVING over a join (σ above α)."""
    customer, orders = _t(als, "customer", "orders")
    grouped = (
        customer.join(orders, F.col("c_custkey") == F.col("o_custkey"))
        .groupBy("c_mktsegment", "o_orderpriority")
        .agg(F.count(F.lit(1)).alias("n_orders"), F.sum("o_totalprice").alias("total"))
    )
    return grouped.filter(F.col("n_orders") >= 3)


@task
def distinct_pairs(als: LineageSession) -> DataFrame:
    """DISTINCT over a join projection (many duplicates collapse)."""
    customer, orders = _t(als, "customer", "orders")
    joined = customer.join(orders, F.col("c_custkey") == F.col("o_custkey"))
    return joined.select("c_mktsegment", "o_orderpriority").distinct()


@task
def union_all_lines(als: LineageSession) -> DataFrame:
    """UNION ALL of two filtered projections of lineitem (duplicates kept)."""
    (lineitem,) = _t(als, "lineitem")
    returned = lineitem.filter(F.col("l_returnflag") == "R").select("l_suppkey", "l_shipmode")
    by_air = lineitem.filter(F.col("l_shipmode") == "AIR").select("l_suppkey", "l_shipmode")
    return returned.unionAll(by_air)


@task
def union_distinct_nations(als: LineageSession) -> DataFrame:
    """UNION (distinct) of the nations of suppliers and of customers in ASIA; the supplier
    branch carries a NULL nation."""
    supplier, customer, nation = _t(als, "supplier", "customer", "nation")
    sup = supplier.select(F.col("s_nationkey").alias("nationkey"))
    cus = customer.join(nation, F.col("c_nationkey") == F.col("n_nationkey")).filter(
        F.col("n_regionkey") == 2
    )
    return sup.union(cus.select(F.col("c_nationkey").alias("nationkey"))).distinct()


@task
def subtract_positive_orders(als: LineageSession) -> DataFrame:
    """subtract (EXCEPT DISTINCT) whose right input holds a UDF: orders without any
    negatively reviewed line."""
    orders, lineitem = _t(als, "orders", "lineitem")
    negative = lineitem.filter(suite_sentiment("l_comment") == "Negative").select("l_orderkey")
    return orders.select(F.col("o_orderkey").alias("orderkey")).subtract(negative)


@task
def except_all_suppliers(als: LineageSession) -> DataFrame:
    """exceptAll (bag difference) of supplier keys over two lineitem filters."""
    (lineitem,) = _t(als, "lineitem")
    returned = lineitem.filter(F.col("l_returnflag") == "R").select("l_suppkey")
    by_truck = lineitem.filter(F.col("l_shipmode").isin("TRUCK", "RAIL")).select("l_suppkey")
    return returned.exceptAll(by_truck)


@task
def sql_except_brands(als: LineageSession) -> str:
    """SQL EXCEPT: brand/size pairs with no well-stocked supplier."""
    return """
        SELECT p_brand, p_size FROM part
        EXCEPT
        SELECT p_brand, p_size FROM part JOIN partsupp ON p_partkey = ps_partkey
        WHERE ps_availqty > 6000
    """


@task
def not_exists_as_anti_join(als: LineageSession) -> str:
    """NOT EXISTS written as LEFT ANTI JOIN: customers without orders (orders with a NULL
    o_custkey match nobody)."""
    return """
        SELECT c_custkey, c_name, c_mktsegment
        FROM customer c LEFT ANTI JOIN orders o ON c.c_custkey = o.o_custkey
    """


@task
def exists_under_or(als: LineageSession) -> str:
    """EXISTS under OR (Spark's existence join: a flag per customer): customers of the
    BUILDING segment or with an urgent order, each with a UDF band of its balance."""
    return """
        SELECT c_custkey, c_mktsegment, suite_price_band(c_acctbal) AS band
        FROM customer c
        WHERE c_mktsegment = 'BUILDING'
           OR EXISTS (SELECT 1 FROM orders o WHERE o.o_custkey = c.c_custkey AND o_orderpriority = '1-URGENT')
    """


@task
def sql_q13_outer_join(als: LineageSession) -> str:
    """TPC-H Q13 as written: a LEFT OUTER JOIN with a condition in ON, count of the padded
    side's key (0 for customers without orders), and an aggregation over it."""
    return """
        SELECT c_count, COUNT(*) AS custdist
        FROM (SELECT c_custkey, COUNT(o_orderkey) AS c_count
              FROM customer LEFT OUTER JOIN orders
                ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%'
              GROUP BY c_custkey) c_orders
        GROUP BY c_count
    """


@task
def sql_subqueries(als: LineageSession) -> str:
    """Subqueries as people write them: correlated EXISTS, NOT IN (with its NULL rule: orders
    with a NULL o_custkey are dropped), a correlated scalar subquery, INTERSECT and a scalar
    subquery in the SELECT list; a UDF on the result."""
    return """
        SELECT o_orderkey, o_orderpriority, suite_price_band(o_totalprice) AS band,
               (SELECT max(c_acctbal) FROM customer) AS top_balance
        FROM (SELECT * FROM orders o
              WHERE o_totalprice > (SELECT 0.5 * MAX(o2.o_totalprice) FROM orders o2
                                    WHERE o2.o_orderpriority = o.o_orderpriority)) o
        WHERE EXISTS (SELECT 1 FROM lineitem l
                      WHERE l.l_orderkey = o.o_orderkey AND l.l_commitdate < l.l_receiptdate)
          AND o_custkey NOT IN (SELECT c_custkey FROM customer WHERE c_mktsegment = 'BUILDING')
          AND o_orderkey IN (SELECT l_orderkey FROM lineitem WHERE l_returnflag = 'R'
                             INTERSECT SELECT l_orderkey FROM lineitem WHERE l_shipmode = 'AIR')
    """


@task
def sql_window_rollup(als: LineageSession) -> str:
    """A window aggregate over whole partitions (the largest order of each segment) feeding a
    ROLLUP with a UDF key: subtotals per segment and band, per segment, and overall."""
    return """
        SELECT c_mktsegment, suite_price_band(o_totalprice) AS band, COUNT(*) AS n, MAX(seg_top) AS top
        FROM (SELECT o_totalprice, c_mktsegment,
                     MAX(o_totalprice) OVER (PARTITION BY c_mktsegment) AS seg_top
              FROM orders JOIN customer ON o_custkey = c_custkey) x
        WHERE o_totalprice * 4 > seg_top
        GROUP BY ROLLUP(c_mktsegment, suite_price_band(o_totalprice))
    """


@task
def sql_rank_running_sum(als: LineageSession) -> str:
    """Ordered windows: each customer's two highest priorities by rank() (ties share a rank),
    with dense_rank() and a running sum over the same order (peers summed together); NULL
    customers form one partition; row_number() and a ROWS running sum over an order without
    ties (the order key ends in the primary key); a UDF on the result."""
    return """
        SELECT o_orderkey, o_custkey, suite_price_band(o_totalprice) AS band, r, dr, running, n, cum
        FROM (SELECT o_orderkey, o_custkey, o_totalprice,
                     rank() OVER w AS r, dense_rank() OVER w AS dr, sum(o_totalprice) OVER w AS running,
                     row_number() OVER u AS n,
                     sum(o_totalprice) OVER (PARTITION BY o_custkey ORDER BY o_orderdate, o_orderkey
                                             ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS cum
              FROM orders WINDOW w AS (PARTITION BY o_custkey ORDER BY o_orderpriority DESC),
                                 u AS (PARTITION BY o_custkey ORDER BY o_orderdate, o_orderkey)) x
        WHERE r <= 2
    """


@task
def explode_model_list(als: LineageSession) -> DataFrame:
    """explode of a model's list output (one row per word it found, as one per detected box),
    then per word a pivot on ship mode (one mode no line has): each word row's lineage is its
    line and that call; a pivoted row's is every word row of its word, all modes."""
    (lineitem,) = _t(als, "lineitem")
    found = F.explode(suite_opinion_words("l_comment")).alias("word")
    words = lineitem.select("l_shipmode", "l_quantity", found)
    by_mode = words.groupBy("word").pivot("l_shipmode", ["AIR", "MAIL", "BOAT"])
    return by_mode.agg(F.count(F.lit(1)).alias("n"), F.max("l_quantity").alias("most"))


@task
def left_semi_air_orders(als: LineageSession) -> DataFrame:
    """LEFT SEMI JOIN: orders with a line shipped by AIR, with a UDF price band."""
    orders, lineitem = _t(als, "orders", "lineitem")
    air = lineitem.filter(F.col("l_shipmode") == "AIR")
    kept = orders.join(air, orders.o_orderkey == air.l_orderkey, "left_semi")
    return kept.select("o_orderkey", "o_orderpriority", suite_price_band("o_totalprice").alias("band"))


@task
def theta_join_richer(als: LineageSession) -> DataFrame:
    """Theta join: per supplier, how many customers of its region it out-balances."""
    supplier, customer = _t(als, "supplier", "customer")
    joined = supplier.join(
        customer,
        (F.col("s_acctbal") > F.col("c_acctbal")) & (F.col("c_custkey") % 4 == F.col("s_suppkey") % 4),
    )
    return joined.groupBy("s_suppkey").agg(F.count(F.lit(1)).alias("n_poorer"))


@task
def order_by_limit(als: LineageSession) -> DataFrame:
    """ORDER BY (a total order) + LIMIT at the top, over a UDF projection."""
    (orders,) = _t(als, "orders")
    banded = orders.select("o_orderkey", "o_totalprice", suite_price_band("o_totalprice").alias("band"))
    return banded.orderBy(F.col("o_totalprice").desc(), F.col("o_orderkey")).limit(6)


@task
def null_group_key(als: LineageSession) -> DataFrame:
    """A NULL join/group key: orders ⋈ lineitem grouped by the nullable o_custkey, so one
    output group is NULL."""
    orders, lineitem = _t(als, "orders", "lineitem")
    joined = orders.join(lineitem, F.col("o_orderkey") == F.col("l_orderkey"))
    return joined.groupBy("o_custkey").agg(F.sum("l_quantity").alias("qty"), F.count(F.lit(1)).alias("n"))


@task
def null_join_key(als: LineageSession) -> DataFrame:
    """A join on a column with NULLs on both sides: suppliers (one with a NULL nation) paired
    with customers of the same nation."""
    supplier, customer = _t(als, "supplier", "customer")
    joined = supplier.join(customer, F.col("s_nationkey") == F.col("c_nationkey"))
    return joined.select("s_suppkey", "c_custkey", "s_nationkey")


@task
def two_udfs(als: LineageSession) -> DataFrame:
    """Three UDFs in one task: an image filter, then sentiment and a price band (of an
    expression) in the projection feeding an aggregation."""
    lineitem, part = _t(als, "lineitem", "part")
    joined = lineitem.join(part, F.col("l_partkey") == F.col("p_partkey")).filter(
        suite_person_image("p_image")
    )
    judged = joined.select(
        suite_sentiment("l_comment").alias("sentiment"),
        suite_price_band(F.col("l_extendedprice") * (1 - F.col("l_discount"))).alias("band"),
    )
    return judged.groupBy("sentiment", "band").agg(F.count(F.lit(1)).alias("n"))


@task
def sql_udf_group_by(als: LineageSession) -> str:
    """A SQL string task: the same UDF call in SELECT and in GROUP BY, over a join."""
    return """
        SELECT c_mktsegment, suite_price_band(o_totalprice) AS band,
               COUNT(*) AS n_orders, SUM(o_totalprice) AS total
        FROM orders JOIN customer ON o_custkey = c_custkey
        GROUP BY c_mktsegment, suite_price_band(o_totalprice)
    """


@task
def sql_cte_twice_between(als: LineageSession) -> str:
    """A WITH query referenced twice (each reference its own copy), BETWEEN, and a UDF filter
    next to plain predicates (the plain ones go below the φ): Q15's shape."""
    return """
        WITH positive AS (
          SELECT l_suppkey, SUM(l_extendedprice) AS revenue
          FROM lineitem
          WHERE l_quantity BETWEEN 5 AND 40 AND suite_sentiment(l_comment) = 'Positive'
          GROUP BY l_suppkey)
        SELECT s_name, revenue
        FROM supplier JOIN positive ON s_suppkey = l_suppkey
             JOIN (SELECT MAX(revenue) AS top FROM positive) best ON revenue >= top * 0.5
    """


@task
def loan_example(als: LineageSession) -> DataFrame:
    """The paper's loan example (Example 4) as DataFrame code."""
    return loan_task(als)


TASKS_BY_ID = {t.id: t for t in TASKS}


def build(als: LineageSession, task_id: str) -> DataFrame | str:
    return TASKS_BY_ID[task_id].build(als)


def plain_dataframe(als: LineageSession, task_id: str) -> DataFrame:
    """The task as a plain Spark DataFrame (SQL strings are run through ``als.sql``)."""
    built = build(als, task_id)
    return als.sql(built) if isinstance(built, str) else built

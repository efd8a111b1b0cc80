"""The paper's loan example (Fig. 1, Example 4), completed with rows the filter and the
joins discard: the task α_{Judge,COUNT(*)}(φ_credit_rules(π(Client ⋈ Debt ⋈ σ_December(Loan))))."""

from __future__ import annotations

from datetime import date

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from reasoning_udfs.loan_rules import credit_rules
from tracing.session import LineageSession

CLIENT = pd.DataFrame(
    [
        ("0001", "Havey", "UK", 3400),
        ("0002", "Joa", "US", 2200),
        ("0003", "Kim", "JP", 5100),
        ("0004", "Lena", "DE", 2800),  # applied in November only: the filter drops her
        ("0005", "Omar", "EG", 4000),  # no debt record: the join drops him
        ("0006", "Pia", "FR", 3000),
    ],
    columns=["ClientID", "Name", "Country", "Income"],
)
DEBT = pd.DataFrame(
    [
        ("0001", 810, date(2020, 12, 7)),
        ("0002", 1350, date(2020, 12, 17)),
        ("0003", 300, date(2020, 12, 3)),
        ("0004", 1000, date(2020, 11, 20)),
        ("0006", 1200, date(2020, 12, 1)),
    ],
    columns=["ClientID", "Debt", "DebtDate"],
)
LOAN = pd.DataFrame(
    [
        ("L01", "0001", 4000, date(2020, 12, 16)),
        ("L02", "0002", 20000, date(2020, 12, 19)),
        ("L03", "0003", 6000, date(2020, 12, 5)),
        ("L04", "0003", 9000, date(2020, 10, 2)),  # October: filtered out
        ("L05", "0004", 7000, date(2020, 11, 28)),  # November: filtered out
        ("L06", "0005", 3000, date(2020, 12, 10)),
        ("L07", "0006", 9000, date(2020, 12, 22)),
    ],
    columns=["LoanID", "ClientID", "LoanAmount", "ApplicationDate"],
)


def register_loan_tables(als: LineageSession) -> dict[str, DataFrame]:
    """Register Client (key ClientID), Debt (key ClientID) and Loan (key LoanID)."""
    return {
        "client": als.register_table("client", CLIENT, key="ClientID"),
        "debt": als.register_table("debt", DEBT, key="ClientID"),
        "loan": als.register_table("loan", LOAN, key="LoanID"),
    }


def loan_task(als: LineageSession) -> DataFrame:
    """The task of Example 4 as ordinary PySpark code."""
    client, debt, loan = als.table("client"), als.table("debt"), als.table("loan")
    december = loan.filter(F.month("ApplicationDate") == 12)
    joined = client.join(debt, client.ClientID == debt.ClientID).join(
        december, client.ClientID == december.ClientID
    )
    examined = joined.select("Income", "Debt", "LoanAmount").withColumn(
        "Judge", credit_rules("Income", "Debt", "LoanAmount")
    )
    return examined.groupBy("Judge").agg(F.count(F.lit(1)).alias("count"))


LOAN_SQL = """
SELECT Judge, COUNT(*) AS count
FROM (SELECT credit_rules(c.Income, d.Debt, l.LoanAmount) AS Judge
      FROM client c JOIN debt d ON c.ClientID = d.ClientID
                    JOIN loan l ON c.ClientID = l.ClientID
      WHERE month(l.ApplicationDate) = 12)
GROUP BY Judge
"""

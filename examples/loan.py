"""The paper's loan example as a task file: ``al run examples/loan.py --store al_store``
registers Client, Debt and Loan and runs α_{Judge,COUNT(*)}(φ_credit_rules(...))."""

from pyspark.sql import DataFrame

from cda_workload.workloads.loan_example import loan_task, register_loan_tables
from tracing import LineageSession


def task(als: LineageSession) -> DataFrame:
    register_loan_tables(als)
    return loan_task(als)

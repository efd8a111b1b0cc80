"""Run tasks under the Rerun / Full / Function Materialization strategies and restore
intermediate results from the Parquet results store."""

from materialization.execute import UDFError
from materialization.store import ResultsStore, StoreError
from materialization.strategies import STRATEGIES

__all__ = ["STRATEGIES", "ResultsStore", "StoreError", "UDFError"]

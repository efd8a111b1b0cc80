"""Model UDFs with two modes: normal (value) and reasoning (value and reason)."""

from reasoning_udfs.udf import ReasoningUDF, UDFRowError, lookup

__all__ = ["ReasoningUDF", "UDFRowError", "lookup"]

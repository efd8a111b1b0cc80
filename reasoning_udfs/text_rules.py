"""A cheap, transparent text UDF for workloads and tests: keyword sentiment.

Value: 'Positive' or 'Negative' by counting words from two small lexicons (tuned to the
TPC-H comment vocabulary); reason: the words that counted. It stands in where a real
sentiment model would be too slow for a test, and shows the shape such a reason takes.
"""

from __future__ import annotations

import re
from typing import Any

from reasoning_udfs.udf import ReasoningUDF

POSITIVE = frozenset(
    {
        "carefully",
        "quickly",
        "blithely",
        "final",
        "special",
        "bold",
        "even",
        "express",
        "great",
        "good",
        "love",
        "excellent",
    }
)
NEGATIVE = frozenset(
    {
        "furiously",
        "slyly",
        "ironic",
        "pending",
        "regular",
        "idle",
        "unusual",
        "bad",
        "terrible",
        "broke",
        "poor",
    }
)
_WORD = re.compile(r"[a-z]+")


class KeywordSentiment(ReasoningUDF):
    name = "keyword_sentiment"
    value_type = "string"
    reason_type = "struct<positive: array<string>, negative: array<string>>"

    def main(self, text: str | None) -> str:
        return self.main_with_reason(text)[0]

    def main_with_reason(self, text: str | None) -> tuple[str, dict[str, Any]]:
        words = _WORD.findall((text or "").lower())
        pos = [w for w in words if w in POSITIVE]
        neg = [w for w in words if w in NEGATIVE]
        return ("Positive" if len(pos) >= len(neg) else "Negative"), {"positive": pos, "negative": neg}


keyword_sentiment = KeywordSentiment()

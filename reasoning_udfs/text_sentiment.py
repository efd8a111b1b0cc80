"""``text_sentiment``: English sentiment of a text from the SST-2 MiniLM of
:mod:`models.sentiment_model`.

Value: 'Positive' or 'Negative'. Reason: the likelihood of that label (softmax probability),
the attribution method, and the top words by |Integrated Gradients| attribution, signed so that
positive pushes toward the value. Normal mode runs one no-grad forward pass; only reasoning mode
pays for the attributions (about ten times the cost), which is why the two modes exist.
Null, empty or blank text gives a null value and a null reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from models import sentiment_model
from reasoning_udfs.udf import ReasoningUDF


class TextSentiment(ReasoningUDF):
    name = "text_sentiment"
    value_type = "string"
    reason_type = (
        "struct<likelihood: double, method: string, "
        "tokens: array<struct<token: string, attribution: double>>>"
    )
    reason_cost = "expensive"  # Integrated Gradients: ~18x the label on CPU

    def main(self, text: str | None) -> str | None:
        return self.main_batch([(text,)])[0]

    def main_with_reason(self, text: str | None) -> tuple[str | None, dict[str, Any] | None]:
        return self.main_with_reason_batch([(text,)])[0]

    def probability(self, value: str, reason: dict[str, Any] | None) -> float | None:
        """The classifier's softmax probability of the label it gave."""
        return None if reason is None else reason["likelihood"]

    def main_batch(self, rows: Sequence[tuple]) -> list[str | None]:
        texts, present = _present(rows)
        out: list[str | None] = [None] * len(rows)
        for i, (label, _) in zip(present, sentiment_model.classify(texts)):
            out[i] = label
        return out

    def main_with_reason_batch(self, rows: Sequence[tuple]) -> list[tuple[str | None, dict[str, Any] | None]]:
        texts, present = _present(rows)
        out: list[tuple[str | None, dict[str, Any] | None]] = [(None, None)] * len(rows)
        for i, explained in zip(present, sentiment_model.explain(texts)):
            reason = {
                "likelihood": explained.likelihood,
                "method": sentiment_model.METHOD,
                "tokens": [{"token": t, "attribution": a} for t, a in explained.tokens],
            }
            out[i] = (explained.label, reason)
        return out


def _present(rows: Sequence[tuple]) -> tuple[list[str], list[int]]:
    """The non-blank texts and their row positions."""
    present = [i for i, (text,) in enumerate(rows) if text is not None and text.strip()]
    return [rows[i][0] for i in present], present


text_sentiment = TextSentiment()

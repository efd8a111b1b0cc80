"""The paper's ``credit_exam`` with a learned model: judges a loan application from
(Income, Debt, LoanAmount) with the random forest of :mod:`models.credit_model`.

Value: 'Accept', 'Marginal' or 'Reject'. Reason: how much each attribute moved the predicted
class's probability, from SHAP (``credit_exam``, exact Shapley values of the trees) or LIME
(``credit_exam_lime``, a local linear surrogate fitted on samples); ``attributes`` names the
decisive ones, those pushing toward the predicted class (the largest one if none does).

The rule version of the paper's model, kept for the golden tests, is ``credit_rules``
(:mod:`reasoning_udfs.loan_rules`).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import numpy as np

from models.credit_model import CLASSES, FEATURES, LIME_SAMPLES, CreditModel, trained
from reasoning_udfs.udf import ReasoningUDF

Number = float | int | Decimal | None


def _features(income: Number, debt: Number, loan_amount: Number) -> tuple[float, float, float]:
    """The row as floats (Spark hands ints and decimals); nulls and impossible amounts are errors."""
    if income is None or income <= 0:
        raise ValueError(f"income must be positive, got {income!r}")
    if debt is None or debt < 0:
        raise ValueError(f"debt must be a non-negative number, got {debt!r}")
    if loan_amount is None or loan_amount < 0:
        raise ValueError(f"loan_amount must be a non-negative number, got {loan_amount!r}")
    return float(income), float(debt), float(loan_amount)


class CreditExam(ReasoningUDF):
    """SHAP reasons; subclasses pick another explainer by overriding ``_attributions``."""

    name = "credit_exam"
    value_type = "string"
    reason_type = (
        "struct<method: string, attributes: array<string>, base_value: double, "
        "attributions: array<struct<attribute: string, value: double, attribution: double>>>"
    )
    method = "shap.TreeExplainer"

    def main(self, income: Number, debt: Number, loan_amount: Number) -> str:
        return self._values(np.array([_features(income, debt, loan_amount)]))[0]

    def main_with_reason(
        self, income: Number, debt: Number, loan_amount: Number
    ) -> tuple[str, dict[str, Any]]:
        return self._judged(np.array([_features(income, debt, loan_amount)]))[0]

    def main_batch(self, rows: Sequence[tuple]) -> list[str]:
        return self._values(self._matrix(rows)) if rows else []

    def main_with_reason_batch(self, rows: Sequence[tuple]) -> list[tuple[str, dict[str, Any]]]:
        return self._judged(self._matrix(rows)) if rows else []

    def _values(self, x: np.ndarray) -> list[str]:
        return [CLASSES[c] for c in trained().predict(x)]

    def _judged(self, x: np.ndarray) -> list[tuple[str, dict[str, Any]]]:
        pred, attributions, bases = self._attributions(trained(), x)
        explained = zip(pred, x, attributions, bases)
        return [(CLASSES[c], self._reason(row, attr, base)) for c, row, attr, base in explained]

    def _attributions(self, model: CreditModel, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return model.shap_attributions(x)

    def _matrix(self, rows: Sequence[tuple]) -> np.ndarray:
        return np.array([self._call_row(_features, row) for row in rows])

    def _reason(self, row: np.ndarray, attr: np.ndarray, base: float) -> dict[str, Any]:
        """Attributions ranked by size; ``base_value`` + their sum is the explainer's account
        of the predicted class's probability (exact for SHAP, LIME's local model for LIME)."""
        ranked = sorted(range(len(FEATURES)), key=lambda j: -abs(attr[j]))
        decisive = [FEATURES[j] for j in ranked if attr[j] > 0] or [FEATURES[ranked[0]]]
        return {
            "method": self.method,
            "attributes": decisive,
            "base_value": float(base),
            "attributions": [
                {"attribute": FEATURES[j], "value": float(row[j]), "attribution": float(attr[j])}
                for j in ranked
            ],
        }


class CreditExamLime(CreditExam):
    """The same model and reason shape, with LIME attributions."""

    name = "credit_exam_lime"
    method = f"lime.LimeTabularExplainer(num_samples={LIME_SAMPLES})"

    def _attributions(self, model: CreditModel, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return model.lime_attributions(x)


credit_exam = CreditExam()
credit_exam_lime = CreditExamLime()

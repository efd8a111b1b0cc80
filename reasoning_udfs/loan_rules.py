"""The paper's running example (Examples 1-3): its ``credit_exam`` judges a loan application
from (Income, Debt, LoanAmount) and, in reasoning mode, names the attributes that decided it.

Here as ``credit_rules``, a transparent rule model, so the golden test knows the exact answer:
the debt ratio (Debt / Income) and the loan ratio (LoanAmount / Income) decide. The learned
model with SHAP/LIME reasons is ``reasoning_udfs.credit_exam``.
"""

from __future__ import annotations

from typing import Any

from reasoning_udfs.udf import ReasoningUDF

ACCEPT_DEBT, ACCEPT_LOAN = 0.3, 2.0
REJECT_DEBT, REJECT_LOAN = 0.5, 5.0


class CreditRules(ReasoningUDF):
    name = "credit_rules"
    value_type = "string"
    reason_type = "struct<attributes: array<string>, debt_ratio: double, loan_ratio: double>"

    def main(self, income: float, debt: float, loan_amount: float) -> str:
        return self.main_with_reason(income, debt, loan_amount)[0]

    def main_with_reason(self, income: float, debt: float, loan_amount: float) -> tuple[str, dict[str, Any]]:
        if income is None or income <= 0:
            raise ValueError(f"income must be positive, got {income!r}")
        debt_ratio = float(debt) / float(income)
        loan_ratio = float(loan_amount) / float(income)
        if debt_ratio > REJECT_DEBT and loan_ratio > REJECT_LOAN:
            judge, decisive = "Reject", ["Debt", "LoanAmount"]
        elif debt_ratio <= ACCEPT_DEBT and loan_ratio <= ACCEPT_LOAN:
            judge, decisive = "Accept", ["Income", "LoanAmount"]
        else:
            judge = "Marginal"
            decisive = [
                a
                for a, high in (("Debt", debt_ratio > ACCEPT_DEBT), ("LoanAmount", loan_ratio > ACCEPT_LOAN))
                if high
            ]
        reason = {
            "attributes": decisive,
            "debt_ratio": round(debt_ratio, 4),
            "loan_ratio": round(loan_ratio, 4),
        }
        return judge, reason


credit_rules = CreditRules()

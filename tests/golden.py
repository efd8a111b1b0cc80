"""The published answer of the paper's loan example (Fig. 4), shared by the local and
cluster golden tests."""

from __future__ import annotations

from tracing import AugmentedLineage

LOAN_OUTPUT = [("Accept", 2), ("Marginal", 1), ("Reject", 1)]


def assert_reject_lineage(lin: AugmentedLineage) -> None:
    """AL(⟨Reject, 1⟩): Joa's client, debt and December loan rows, and one credit_rules call."""
    assert lin.tables == ["client", "debt", "loan"]
    assert lin.source_rows("client") == [{"ClientID": "0002", "Name": "Joa", "Country": "US", "Income": 2200}]
    assert lin.source_ids("debt") == {("0002",)}
    assert [r["Debt"] for r in lin.source_rows("debt")] == [1350]
    assert lin.source_ids("loan") == {("L02",)}
    assert [r["LoanAmount"] for r in lin.source_rows("loan")] == [20000]
    (rl,) = lin.reasoning_rows()
    assert rl["udf"] == "credit_rules"
    assert rl["inputs"] == {"Income": 2200, "Debt": 1350, "LoanAmount": 20000}
    assert rl["value"] == "Reject"
    assert rl["reason"]["attributes"] == ["Debt", "LoanAmount"]

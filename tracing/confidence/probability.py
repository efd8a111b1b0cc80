"""One entry point choosing how to compute a formula's probability, reporting the method used."""

from __future__ import annotations

import dataclasses
from time import perf_counter

from tracing.confidence.estimate import Estimate
from tracing.confidence.exact import BudgetExceeded, exact_probability
from tracing.confidence.facts import Facts, independent
from tracing.confidence.formula import Const, Formula, Var
from tracing.confidence.montecarlo import dnf_clauses, karp_luby, naive_monte_carlo

__all__ = ["METHODS", "Estimate", "probability"]

METHODS = ("auto", "exact", "karp-luby", "monte-carlo")


def probability(
    f: Formula,
    facts: Facts,
    method: str = "auto",
    epsilon: float = 0.01,
    delta: float = 0.01,
    seed: int = 0,
    budget: int | None = 100_000,
) -> Estimate:
    """P(f) by `method`; "auto" tries exact within `budget` Shannon expansions, then samples.

    The fallback is Karp-Luby (relative bound) when f is a DNF of literals after the Lemma 6.1
    rewrite, else naive Monte Carlo (absolute bound). "exact" raises BudgetExceeded past the budget.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    start = perf_counter()
    if isinstance(f, Const | Var):
        value = facts.prob(f.id) if isinstance(f, Var) else float(f.value)
        return Estimate(value, "trivial", seconds=perf_counter() - start)
    if method in ("auto", "exact"):
        try:
            return Estimate(exact_probability(f, facts, budget), "exact", seconds=perf_counter() - start)
        except BudgetExceeded:
            if method == "exact":
                raise
    if method == "auto":
        method = "karp-luby" if dnf_clauses(independent(f, facts)[0]) is not None else "monte-carlo"
    sample = karp_luby if method == "karp-luby" else naive_monte_carlo
    est = sample(f, facts, epsilon, delta, seed)
    return dataclasses.replace(est, seconds=perf_counter() - start)

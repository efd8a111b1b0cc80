"""Trio's extraneous-data and coexistence checks (section 6.2), decided exactly, without floating point.

"Confidence > 0" is decided as possibility: each fact can be true when p > 0 and false when p < 1,
a group can choose none only when its slack is > 0. The decomposition/Shannon traversal of
`exact.evaluate` runs over (can be true, can be false) pairs instead of floats, so a tiny but positive
probability (say 2^-200 from many negations) can never round to an unsatisfiable 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracing.confidence.exact import evaluate
from tracing.confidence.facts import Facts, independent
from tracing.confidence.formula import Formula, conj, disj, neg

Support = tuple[bool, bool]  # (f can be true, f can be false) in some possible world


class _Possibility:
    """The `exact.Algebra` of possibilities over independent variables."""

    def const(self, value: bool) -> Support:
        return value, not value

    def var(self, p: float) -> Support:
        return p > 0.0, p < 1.0

    def neg(self, x: Support) -> Support:
        return x[1], x[0]

    def conj(self, xs: Sequence[Support]) -> Support:
        return all(t for t, _ in xs), any(f for _, f in xs)

    def disj(self, xs: Sequence[Support]) -> Support:
        return any(t for t, _ in xs), all(f for _, f in xs)

    def shannon(self, p: float, high: Support, low: Support) -> Support:
        yes, no = p > 0.0, p < 1.0
        return (yes and high[0]) or (no and low[0]), (yes and high[1]) or (no and low[1])


def _spread(facts: Facts) -> Facts:
    """Facts with the same possible worlds and round probabilities (1/2, or 1/k within a group).

    The Lemma 6.1 coins of these probabilities are 0 or 1 exactly when they must be.
    """
    probs = {v: 0.0 if p == 0.0 else 1.0 if p == 1.0 else 0.5 for v, p in facts.probs.items()}
    for g, alts in facts.members.items():
        live = [a for a in alts if facts.probs[a] > 0.0]
        share = 1.0 / (len(live) + (facts.slack(g) > 0.0))
        probs.update((a, share if a in live else 0.0) for a in alts)
    return Facts(probs, facts.groups)


def _support(f: Formula, facts: Facts) -> Support:
    g, indep = independent(f, _spread(facts.restrict(f.vars)))
    return evaluate(g, indep.probs, _Possibility())


def satisfiable(f: Formula, facts: Facts) -> bool:
    """Some possible world (positive probability) satisfies f, i.e. its confidence is > 0."""
    return _support(f, facts)[0]


def valid(f: Formula, facts: Facts) -> bool:
    """Every possible world satisfies f (¬f unsatisfiable): e.g. an extraneous '?' annotation."""
    return not _support(f, facts)[1]


def extraneous(f: Formula, facts: Facts) -> bool:
    """An alternative with expanded lineage f is extraneous: it occurs in no possible instance."""
    return not satisfiable(f, facts)


def can_coexist(f1: Formula, f2: Formula, facts: Facts) -> bool:
    """Some possible instance holds both (the paper's dummy alternative f1 ∧ f2 is satisfiable)."""
    return satisfiable(conj(f1, f2), facts)


def always_together(f1: Formula, f2: Formula, facts: Facts) -> bool:
    """Every possible instance holding one holds the other: (f1 ∧ ¬f2) ∨ (¬f1 ∧ f2) is unsatisfiable."""
    return not satisfiable(disj(conj(f1, neg(f2)), conj(neg(f1), f2)), facts)

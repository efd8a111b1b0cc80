"""Exact evaluation of formulas over independent variables: decomposition + Shannon expansion.

The traversal is written once over an `Algebra`, so the same decomposition serves probabilities
(floats) and the exact, float-free possibility checks in `checks.py`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Protocol, TypeVar

from tracing.confidence.facts import Facts, independent
from tracing.confidence.formula import And, Const, Formula, Not, Var, condition, conj, disj

T = TypeVar("T")


class BudgetExceeded(RuntimeError):
    """More Shannon expansions were needed than the budget allows (callers fall back to sampling)."""


class Algebra(Protocol[T]):
    def const(self, value: bool) -> T: ...
    def var(self, p: float) -> T: ...
    def neg(self, x: T) -> T: ...
    def conj(self, xs: Sequence[T]) -> T: ...
    def disj(self, xs: Sequence[T]) -> T: ...
    def shannon(self, p: float, high: T, low: T) -> T: ...


class Probability:
    """Probabilities of independent events."""

    def const(self, value: bool) -> float:
        return 1.0 if value else 0.0

    def var(self, p: float) -> float:
        return p

    def neg(self, x: float) -> float:
        return 1.0 - x

    def conj(self, xs: Sequence[float]) -> float:
        out = 1.0
        for x in xs:
            out *= x
        return out

    def disj(self, xs: Sequence[float]) -> float:
        return 1.0 - self.conj([1.0 - x for x in xs])

    def shannon(self, p: float, high: float, low: float) -> float:
        return p * high + (1.0 - p) * low


PROBABILITY = Probability()


def components(children: frozenset[Formula]) -> list[list[Formula]]:
    """Split children into groups connected by shared variables (union-find over variables)."""
    kids = list(children)
    parent = list(range(len(kids)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[int, int] = {}
    for i, c in enumerate(kids):
        for v in c.vars:
            j = owner.setdefault(v, i)
            if j != i:
                parent[root(i)] = root(j)
    parts: dict[int, list[Formula]] = {}
    for i, c in enumerate(kids):
        parts.setdefault(root(i), []).append(c)
    return list(parts.values())


def evaluate(f: Formula, probs: Mapping[int, float], algebra: Algebra[T], budget: int | None = None) -> T:
    """f's value in the algebra, variables independent with probabilities probs.

    Independent components of an And/Or combine directly; a connected one is expanded on its most
    frequent variable. Values are memoized per sub-formula. Raises BudgetExceeded after `budget`
    expansions (or when the expansion recurses too deep for Python).
    """
    memo: dict[Formula, T] = {}
    expansions = 0

    def go(g: Formula) -> T:
        nonlocal expansions
        if isinstance(g, Var):
            return algebra.var(probs[g.id])
        if isinstance(g, Const):
            return algebra.const(g.value)
        if isinstance(g, Not):
            return algebra.neg(go(g.child))
        done = memo.get(g)
        if done is not None:
            return done
        is_and = isinstance(g, And)
        parts = components(g.children)
        if len(parts) > 1:
            join = conj if is_and else disj
            values = [go(join(*part)) for part in parts]
            out = algebra.conj(values) if is_and else algebra.disj(values)
        else:
            expansions += 1
            if budget is not None and expansions > budget:
                raise BudgetExceeded(f"more than {budget} Shannon expansions")
            counts = Counter(v for c in g.children for v in c.vars)
            x = max(counts, key=lambda v: (counts[v], -v))
            out = algebra.shannon(probs[x], go(condition(g, x, True)), go(condition(g, x, False)))
        memo[g] = out
        return out

    try:
        return go(f)
    except RecursionError as e:
        raise BudgetExceeded("expansion too deep for exact evaluation") from e


def exact_probability(f: Formula, facts: Facts, budget: int | None = None) -> float:
    """P(f); mutually exclusive alternatives are first made independent by Lemma 6.1."""
    g, indep = independent(f, facts)
    return min(1.0, max(0.0, evaluate(g, indep.probs, PROBABILITY, budget)))

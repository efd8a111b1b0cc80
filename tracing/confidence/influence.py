"""Which base facts matter most for a derived fact: sensitivity, Banzhaf and Shapley values."""

from __future__ import annotations

from dataclasses import dataclass
from math import factorial

import numpy as np

from tracing.confidence.exact import exact_probability
from tracing.confidence.facts import Facts, fix
from tracing.confidence.formula import Formula, condition
from tracing.confidence.vectorised import truth

SHAPLEY_MAX_FACTS = 16


@dataclass(frozen=True)
class FactInfluence:
    """One base fact's weight in a formula.

    effect: P(f | fact) − P(f | ¬fact) under the real probabilities (group-mates false when it holds).
    banzhaf, shapley: values of the fact as a player of the Boolean game f (groups and probabilities
    ignored); shapley is None past SHAPLEY_MAX_FACTS variables.
    """

    fact: int
    probability: float
    effect: float
    banzhaf: float
    shapley: float | None


def _shapley(f: Formula, vs: list[int]) -> dict[int, float]:
    """φ_x = Σ_{S ⊆ N∖{x}} |S|! (n−|S|−1)! / n! · (f(S ∪ {x}) − f(S)), f(S) = f with exactly S true.

    All 2^n coalitions are evaluated at once with numpy; the weight depends only on the size |S|.
    """
    n = len(vs)
    masks = np.arange(1 << n)
    coalitions = ((masks[:, None] >> np.arange(n)) & 1).astype(bool)
    value = truth(f, {v: i for i, v in enumerate(vs)}, coalitions).astype(float)
    size = coalitions.sum(axis=1)
    weight = np.array([factorial(k) * factorial(n - k - 1) / factorial(n) for k in range(n)])
    out: dict[int, float] = {}
    for i, v in enumerate(vs):
        without = masks[~coalitions[:, i]]
        out[v] = float((weight[size[without]] * (value[without | (1 << i)] - value[without])).sum())
    return out


def influence(f: Formula, facts: Facts) -> list[FactInfluence]:
    """Every variable of f with its influence, largest |effect| first (ties by fact id).

    banzhaf = (#models of f|x − #models of f|¬x) / 2^(n−1), obtained as the difference of the two
    cofactors' probabilities with every variable at 1/2 (exact evaluator, no enumeration).
    """
    vs = sorted(f.vars)
    half = Facts(dict.fromkeys(vs, 0.5))
    shapley = _shapley(f, vs) if len(vs) <= SHAPLEY_MAX_FACTS else {}
    out = [
        FactInfluence(
            fact=x,
            probability=facts.prob(x),
            effect=exact_probability(*fix(f, facts, x, True)) - exact_probability(*fix(f, facts, x, False)),
            banzhaf=exact_probability(condition(f, x, True), half)
            - exact_probability(condition(f, x, False), half),
            shapley=shapley.get(x),
        )
        for x in vs
    ]
    return sorted(out, key=lambda i: (-abs(i.effect), i.fact))

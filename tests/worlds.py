"""Brute-force oracle for the confidence core: enumerate every possible world of a few base facts.

Independent facts are in or out; each mutually exclusive group picks one alternative or none
(probability 1 - the group's sum). Kept deliberately naive: it shares no code with tracing.confidence
beyond reading Facts' fields and evaluating formulas with `holds`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from tracing.confidence import Facts, Formula, holds

MAX_FACTS = 16


def worlds(facts: Facts) -> Iterator[tuple[frozenset[int], float]]:
    """(true facts, probability) for every world, zero-probability worlds included."""
    assert len(facts.probs) <= MAX_FACTS
    units: list[list[tuple[tuple[int, ...], float]]] = []
    groups: dict[object, list[int]] = {}
    for v in sorted(facts.probs):
        g = facts.groups.get(v)
        if g is None:
            p = facts.probs[v]
            units.append([((v,), p), ((), 1.0 - p)])
        else:
            groups.setdefault(g, []).append(v)
    for alts in groups.values():
        none = max(0.0, 1.0 - sum(facts.probs[a] for a in alts))
        units.append([((a,), facts.probs[a]) for a in alts] + [((), none)])
    for choice in itertools.product(*units):
        prob = 1.0
        for _, p in choice:
            prob *= p
        yield frozenset(v for vs, _ in choice for v in vs), prob


def brute_probability(f: Formula, facts: Facts) -> float:
    return sum(p for w, p in worlds(facts) if holds(f, w))


def brute_possible(f: Formula, facts: Facts) -> bool:
    """Some world of positive probability satisfies f (exact when probabilities are dyadic)."""
    return any(p > 0.0 and holds(f, w) for w, p in worlds(facts))


def brute_conditional(f: Formula, facts: Facts, var: int, value: bool) -> float:
    """P(f | var = value) by summing worlds."""
    both = sum(p for w, p in worlds(facts) if (var in w) == value and holds(f, w))
    given = sum(p for w, p in worlds(facts) if (var in w) == value)
    return both / given


def model_count(f: Formula, vs: list[int]) -> int:
    """Number of assignments of vs (groups ignored) satisfying f."""
    return sum(
        holds(f, frozenset(v for v, bit in zip(vs, bits) if bit))
        for bits in itertools.product((False, True), repeat=len(vs))
    )

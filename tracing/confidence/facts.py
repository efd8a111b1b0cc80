"""Base-fact probabilities with mutually exclusive groups (Trio x-tuple alternatives), and Lemma 6.1.

The evaluators assume independent variables; `independent` rewrites a formula so that they hold,
and `given` conditions the distribution on one fact, both keeping the group semantics in one place.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from types import MappingProxyType

from tracing.confidence.formula import FALSE, TRUE, Formula, Var, conj, neg, substitute

_NO_GROUPS: Mapping[int, Hashable] = MappingProxyType({})
_SUM_TOLERANCE = 1e-9
# Group slack (the "no alternative" mass) below this is rounding noise from sums like 7 * (1/7): it is 0.
_SLACK_NOISE = 1e-12


class Facts:
    """Probabilities of base facts; `groups[var] = g` makes var an alternative of x-tuple g.

    Alternatives of one group are mutually exclusive; with probability `slack(g)` none is chosen.
    Facts outside every group are independent.
    """

    __slots__ = ("groups", "id_bound", "members", "probs")

    def __init__(self, probs: Mapping[int, float], groups: Mapping[int, Hashable] = _NO_GROUPS) -> None:
        self.probs: dict[int, float] = {int(v): float(p) for v, p in probs.items()}
        self.id_bound = max(map(abs, self.probs), default=0) + 1  # fresh ids start here
        for v, p in self.probs.items():
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"probability of fact {v} is {p}, not in [0, 1]")
        members: dict[Hashable, list[int]] = {}
        for v, g in groups.items():
            self.prob(v)
            members.setdefault(g, []).append(int(v))
        self.groups: dict[int, Hashable] = {int(v): g for v, g in groups.items()}
        self.members: dict[Hashable, tuple[int, ...]] = {g: tuple(sorted(vs)) for g, vs in members.items()}
        for g, vs in self.members.items():
            total = sum(self.probs[v] for v in vs)
            if total > 1.0 + _SUM_TOLERANCE:
                raise ValueError(f"alternatives of group {g!r} sum to {total} > 1")

    def prob(self, var: int) -> float:
        try:
            return self.probs[var]
        except KeyError:
            raise KeyError(f"no probability for fact {var}") from None

    def restrict(self, vs: frozenset[int]) -> Facts:
        """The facts of vs only; for a formula over vs an alternative left out is the same as none.

        Callers restrict before per-formula work so its cost does not grow with all base facts.
        """
        return Facts({v: self.prob(v) for v in vs}, {v: self.groups[v] for v in vs if v in self.groups})

    def mates(self, var: int) -> tuple[int, ...]:
        """The other alternatives of var's group (empty for an independent fact)."""
        g = self.groups.get(var)
        return () if g is None else tuple(v for v in self.members[g] if v != var)

    def slack(self, group: Hashable) -> float:
        """Probability that the group chooses none of its alternatives."""
        rest = 1.0 - sum(self.probs[v] for v in self.members[group])
        return rest if rest > _SLACK_NOISE else 0.0

    def grouped_in(self, vs: frozenset[int]) -> dict[Hashable, tuple[int, ...]]:
        """Groups with at least two alternatives among vs (the ones that break independence), by id order."""
        found: dict[Hashable, list[int]] = {}
        for v in sorted(vs):
            g = self.groups.get(v)
            if g is not None:
                found.setdefault(g, []).append(v)
        return {g: tuple(alts) for g, alts in found.items() if len(alts) > 1}

    def given(self, var: int, value: bool) -> Facts:
        """The distribution of the other facts conditioned on var = value.

        var becomes certain either way; its group-mates become false when it holds and are rescaled by
        1 / (1 - p(var)) when it does not.
        """
        mates = self.mates(var)
        p = self.prob(var)
        probs = dict(self.probs)
        probs[var] = 1.0 if value else 0.0
        for m in mates:
            if value:
                probs[m] = 0.0
            elif p < 1.0:
                probs[m] = min(1.0, probs[m] / (1.0 - p))
        return Facts(probs, self.groups)


def fix(f: Formula, facts: Facts, var: int, value: bool) -> tuple[Formula, Facts]:
    """f and facts given var = value: var's group-mates are false in f when var holds."""
    facts = facts.restrict(f.vars | {var})
    mapping: dict[int, Formula] = {var: TRUE if value else FALSE}
    if value:
        mapping.update((m, FALSE) for m in facts.mates(var))
    return substitute(f, mapping), facts.given(var, value)


def independent(f: Formula, facts: Facts) -> tuple[Formula, Facts]:
    """Lemma 6.1: an equivalent formula over independent variables, with their probabilities.

    For each group with alternatives a_1 < ... < a_n in f: a_1 -> v_1, a_i -> ¬v_1 ∧ ... ∧ ¬v_{i-1} ∧ v_i
    with c(v_i) = c_i / (sum_{j>=i} c_j + δ). δ is the group's slack plus the mass of its alternatives
    absent from f (choosing one of those is, for f, choosing none). The tail is summed, not taken as
    1 - prefix, so the last coin of a full group is exactly 1. The returned facts cover f's variables only.
    """
    vs = f.vars
    probs = {v: facts.prob(v) for v in vs}
    grouped = facts.grouped_in(vs)
    if not grouped:
        return f, Facts(probs)
    fresh = facts.id_bound  # above every id of facts, hence of f
    mapping: dict[int, Formula] = {}
    for g, alts in grouped.items():
        absent = sum(facts.probs[m] for m in facts.members[g] if m not in vs)
        tail = facts.slack(g) + absent
        coins: list[int] = list(range(fresh, fresh + len(alts)))
        fresh += len(alts)
        for i in reversed(range(len(alts))):
            c = probs.pop(alts[i])
            tail += c
            probs[coins[i]] = min(1.0, c / tail) if c > 0.0 else 0.0
        for i, a in enumerate(alts):
            mapping[a] = conj(*(neg(Var(u)) for u in coins[:i]), Var(coins[i]))
    return substitute(f, mapping), Facts(probs)

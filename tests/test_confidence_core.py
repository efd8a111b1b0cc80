"""The pure-Python confidence core against a brute-force possible-worlds oracle (no Spark)."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.worlds import brute_probability
from tracing.confidence import (
    FALSE,
    TRUE,
    BudgetExceeded,
    Facts,
    Formula,
    Var,
    condition,
    conj,
    disj,
    exact_probability,
    holds,
    independent,
    karp_luby,
    naive_monte_carlo,
    neg,
    probability,
    render,
    substitute,
    variables,
)

FAST = settings(max_examples=200, deadline=None)
ID = st.integers(-(2**63), 2**63 - 1)
DYADIC = st.integers(0, 8).map(lambda k: k / 8)


def formulas(ids: list[int], depth: int = 4) -> st.SearchStrategy[Formula]:
    leaf = st.sampled_from(ids).map(Var)
    if depth == 0:
        return leaf
    sub = formulas(ids, depth - 1)
    return st.one_of(
        leaf,
        sub.map(neg),
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: conj(*xs)),
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: disj(*xs)),
    )


@st.composite
def fact_sets(draw: st.DrawFn, max_facts: int = 9, dyadic: bool = False) -> Facts:
    """Random probabilities and groups; dyadic ones make zero-probability worlds exact for the checks."""
    ids = draw(st.lists(ID, min_size=1, max_size=max_facts, unique=True))
    labels = draw(st.lists(st.sampled_from([None, "g", "h"]), min_size=len(ids), max_size=len(ids)))
    prob = DYADIC if dyadic else st.floats(0.0, 1.0)
    probs: dict[int, float] = {}
    groups: dict[int, str] = {}
    for label in ("g", "h"):
        alts = [v for v, lab in zip(ids, labels) if lab == label]
        if dyadic:
            room = 8
            for v in alts:
                k = min(room, draw(st.integers(0, 8)))
                room -= k
                probs[v] = k / 8
        else:
            weights = [draw(st.floats(0.01, 1.0)) for _ in alts]
            total = draw(st.sampled_from([1.0, draw(st.floats(0.0, 1.0))]))
            probs.update((v, total * w / sum(weights)) for v, w in zip(alts, weights))
        groups.update((v, label) for v in alts)
    probs.update((v, draw(prob)) for v in ids if v not in probs)
    return Facts(probs, groups)


@st.composite
def problems(draw: st.DrawFn, max_facts: int = 9, dyadic: bool = False) -> tuple[Formula, Facts]:
    facts = draw(fact_sets(max_facts, dyadic))
    return draw(formulas(sorted(facts.probs))), facts


# --- formulas -------------------------------------------------------------------------------------


def test_smart_constructors_simplify() -> None:
    x, y, z = Var(1), Var(2), Var(-3)
    assert conj(x, conj(y, z)) == conj(z, y, x)
    assert conj(x, TRUE) == x and conj(x, FALSE) == FALSE and conj() == TRUE
    assert disj(x, FALSE) == x and disj(x, TRUE) == TRUE and disj() == FALSE
    assert neg(neg(x)) == x and neg(TRUE) == FALSE
    assert conj(x, neg(x)) == FALSE and disj(x, neg(x)) == TRUE
    assert variables(disj(conj(x, y), neg(z))) == {1, 2, -3}
    assert len({conj(x, y), conj(y, x)}) == 1
    assert render(disj(conj(Var(12), Var(23)), conj(Var(13), Var(23)))) == "(12 ∧ 23) ∨ (13 ∧ 23)"
    assert render(neg(conj(x, y)), lambda v: f"t{v}") == "¬(t1 ∧ t2)"


@FAST
@given(problems(), st.data())
def test_holds_condition_substitute_agree(problem: tuple[Formula, Facts], data: st.DataObject) -> None:
    f, facts = problem
    vs = sorted(facts.probs)
    world = frozenset(data.draw(st.sets(st.sampled_from(vs))))
    x = data.draw(st.sampled_from(vs))
    assert holds(condition(f, x, x in world), world) == holds(f, world)
    g = data.draw(formulas(vs, 2))
    assert holds(substitute(f, {x: g}), world) == holds(f, world - {x} | ({x} if holds(g, world) else set()))


# --- facts and Lemma 6.1 ---------------------------------------------------------------------------


def test_facts_validate() -> None:
    with pytest.raises(ValueError):
        Facts({1: 1.5})
    with pytest.raises(ValueError, match="sum"):
        Facts({1: 0.6, 2: 0.5}, {1: "g", 2: "g"})
    with pytest.raises(KeyError, match="77"):
        Facts({1: 0.5}, {77: "g"})
    with pytest.raises(KeyError, match="42"):
        exact_probability(conj(Var(1), Var(42)), Facts({1: 0.5}))


@FAST
@given(problems())
def test_lemma_6_1_rewrite_preserves_probability(problem: tuple[Formula, Facts]) -> None:
    f, facts = problem
    g, indep = independent(f, facts)
    assert not indep.groups
    assert variables(g).isdisjoint(set(facts.probs) - variables(f))
    assert brute_probability(g, indep) == pytest.approx(brute_probability(f, facts), abs=1e-9)


def test_lemma_6_1_partial_group_and_zero_tail() -> None:
    facts = Facts({1: 0.2, 2: 0.3, 3: 0.5, 4: 0.0, 5: 0.0}, {1: "g", 2: "g", 3: "g", 4: "z", 5: "z"})
    f = disj(Var(1), Var(3), conj(Var(4), neg(Var(5))))
    assert exact_probability(f, facts) == pytest.approx(0.7)
    assert exact_probability(disj(Var(1), Var(3), Var(2)), facts) == pytest.approx(1.0)


# --- exact -----------------------------------------------------------------------------------------


@FAST
@given(problems())
def test_exact_matches_possible_worlds(problem: tuple[Formula, Facts]) -> None:
    f, facts = problem
    assert exact_probability(f, facts) == pytest.approx(brute_probability(f, facts), abs=1e-9)


@settings(max_examples=25, deadline=None)
@given(problems(max_facts=12))
def test_exact_matches_possible_worlds_twelve_facts(problem: tuple[Formula, Facts]) -> None:
    f, facts = problem
    assert exact_probability(f, facts) == pytest.approx(brute_probability(f, facts), abs=1e-9)


RUNNING = Facts({11: 0.8, 12: 0.7, 13: 0.6, 21: 0.8, 22: 1.0, 23: 0.9})
V = {i: Var(i) for i in (11, 12, 13, 21, 22, 23)}


def test_running_example_base_formulas() -> None:
    roster = {31: conj(V[11], V[21]), 32: conj(V[12], V[23]), 33: conj(V[13], V[23])}
    assert [exact_probability(roster[t], RUNNING) for t in (31, 32, 33)] == pytest.approx([0.64, 0.63, 0.54])
    assert exact_probability(disj(roster[31], roster[32]), RUNNING) == pytest.approx(0.8668)
    banquet = conj(disj(V[12], V[13]), V[23])
    assert probability(banquet, RUNNING).value == pytest.approx(0.792)
    assert probability(disj(roster[32], roster[33]), RUNNING).value == pytest.approx(0.792)


def test_alternatives_example() -> None:
    monday, tuesday = Var(61), Var(62)
    facts = Facts({61: 0.6, 62: 0.3}, {61: "ullman", 62: "ullman"})
    assert probability(disj(monday, tuesday), facts).value == pytest.approx(0.9)
    assert probability(conj(monday, tuesday), facts).value == 0.0


def test_budget() -> None:
    xs = [Var(i) for i in range(12)]
    f = disj(*(conj(a, b) for a, b in itertools.pairwise(xs)))
    facts = Facts({i: 0.5 for i in range(12)})
    with pytest.raises(BudgetExceeded):
        exact_probability(f, facts, budget=1)
    est = probability(f, facts, budget=1, epsilon=0.1, delta=0.1)
    assert est.method == "karp-luby" and est.bound == "relative"
    est = probability(neg(f), facts, budget=1, epsilon=0.1, delta=0.1)
    assert est.method == "monte-carlo" and est.bound == "absolute"
    assert est.value == pytest.approx(1 - exact_probability(f, facts), abs=0.1)
    with pytest.raises(ValueError, match="karp-luby"):
        probability(f, facts, method="magic")


# --- Monte Carlo -----------------------------------------------------------------------------------

SEEDS = range(30)
MC_CASES = [
    (disj(conj(V[11], V[21]), conj(V[12], V[23]), conj(V[13], V[23])), RUNNING),
    (disj(Var(1), Var(2), conj(Var(3), neg(Var(4)))), Facts({1: 0.05, 2: 0.02, 3: 0.1, 4: 0.3})),
    (disj(Var(61), conj(Var(62), Var(5))), Facts({61: 0.6, 62: 0.3, 5: 0.5}, {61: "u", 62: "u"})),
]


@pytest.mark.parametrize("case", range(len(MC_CASES)))
def test_karp_luby_relative_bound(case: int) -> None:
    f, facts = MC_CASES[case]
    p = exact_probability(f, facts)
    misses = sum(abs(karp_luby(f, facts, 0.1, 0.1, seed).value - p) > 0.1 * p for seed in SEEDS)
    assert misses <= 7


@pytest.mark.parametrize("case", range(len(MC_CASES)))
def test_naive_monte_carlo_absolute_bound(case: int) -> None:
    f, facts = MC_CASES[case]
    f = neg(f) if case == 1 else f
    p = exact_probability(f, facts)
    estimates = [naive_monte_carlo(f, facts, 0.1, 0.1, seed) for seed in SEEDS]
    assert estimates[0].samples == math.ceil(math.log(20) / 0.02)
    assert sum(abs(e.value - p) > 0.1 for e in estimates) <= 7

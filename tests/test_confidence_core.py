"""The pure-Python confidence core against a brute-force possible-worlds oracle (no Spark)."""

from __future__ import annotations

import functools
import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.worlds import brute_conditional, brute_possible, brute_probability, model_count, worlds
from tracing.confidence import (
    FALSE,
    TRUE,
    BudgetExceeded,
    Facts,
    Formula,
    LineageGraph,
    Var,
    always_together,
    can_coexist,
    condition,
    conj,
    disj,
    exact_probability,
    extraneous,
    holds,
    independent,
    influence,
    karp_luby,
    naive_monte_carlo,
    neg,
    probability,
    render,
    satisfiable,
    slin_breakpoints,
    substitute,
    valid,
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


# --- deep lineage ----------------------------------------------------------------------------------

RUNNING_LAMBDA: dict[int, Formula] = {
    31: conj(V[11], V[21]),
    32: conj(V[12], V[23]),
    33: conj(V[13], V[23]),
    41: disj(Var(31), Var(32)),
    42: Var(33),
    43: conj(Var(31), V[22]),
    36: conj(V[12], V[23]),
    37: conj(V[13], V[23]),
    51: disj(Var(36), Var(37)),  # Plan 2 of EventLikelihood
    35: disj(V[12], V[13]),
    45: conj(V[23], Var(35)),
    52: Var(45),  # Plan 1
}


class Recorder:
    """A batched λ lookup that records each call."""

    def __init__(self, table: dict[int, Formula]) -> None:
        self.table = table
        self.calls: list[list[int]] = []

    def __call__(self, ids: object) -> dict[int, Formula]:
        ids = sorted(ids)  # type: ignore[call-overload]
        self.calls.append(ids)
        return {i: self.table[i] for i in ids if i in self.table}


def test_running_example_deep() -> None:
    graph = LineageGraph(Recorder(RUNNING_LAMBDA), RUNNING)
    expected = {31: 0.64, 32: 0.63, 33: 0.54, 41: 0.8668, 42: 0.54, 51: 0.792, 52: 0.792}
    for t, p in expected.items():
        assert graph.conf(t).value == pytest.approx(p)
        assert graph.conf_basic(t).value == pytest.approx(p)
        assert graph.conf(t).method == "exact" or t == 42
    assert graph.indep(51) == {12, 13, 23}  # 36 and 37 share 23: never 0.8298
    assert graph.indep(52) == {45}
    assert graph.indep(41) == {31, 32}
    assert render(graph.expand(41)) == "(11 ∧ 21) ∨ (12 ∧ 23)"


def test_lineage_fetched_level_by_level_and_memoized() -> None:
    lam = Recorder(RUNNING_LAMBDA)
    graph = LineageGraph(lam, RUNNING)
    confs = graph.conf_many([41, 42])
    assert confs[41].value == pytest.approx(0.8668) and confs[42].value == pytest.approx(0.54)
    assert lam.calls == [[41, 42], [31, 32, 33], [11, 12, 13, 21, 23]]
    evaluations = graph.evaluations
    assert graph.conf(43).value == pytest.approx(0.64)
    assert lam.calls[3:] == [[43], [22]]  # 31 and below were not fetched again
    assert graph.evaluations == evaluations + 1  # only 43 itself: 31's confidence was memoized


def test_deep_reports_sampling_without_a_composed_bound() -> None:
    table = {**RUNNING_LAMBDA, 53: conj(Var(51), V[22])}
    graph = LineageGraph(
        Recorder(table), RUNNING, functools.partial(probability, budget=0, epsilon=0.1, delta=0.1)
    )
    assert graph.conf(51).method == "karp-luby" and graph.conf(51).bound == "relative"
    top = graph.conf(53)
    assert top.method == "karp-luby" and top.bound is None
    assert top.value == pytest.approx(0.792, rel=0.1)


def figure3() -> tuple[dict[int, Formula], Facts]:
    """t = 100 over t1 = 101, t2 = 102 sharing base 7; t3 = 103, t4 = 104, t6 = 106 ⊃ t5 = 105 disjoint."""
    b = {i: Var(i) for i in range(1, 10)}
    lam: dict[int, Formula] = {
        103: conj(b[1], b[2]),
        104: disj(b[3], b[4]),
        105: conj(b[5], neg(b[6])),
        106: disj(Var(105), b[8]),
        101: conj(Var(103), b[7]),
        102: disj(b[7], Var(104)),
        100: disj(Var(101), conj(Var(102), Var(106))),
        110: disj(Var(103), b[9]),  # 1 (inside 103) and 9 are alternatives of one x-tuple
    }
    probs = {1: 0.5, 2: 0.9, 3: 0.2, 4: 0.3, 5: 0.6, 6: 0.1, 7: 0.7, 8: 0.25, 9: 0.4}
    return lam, Facts(probs, {1: "x", 9: "x"})


def test_indep_on_figure_3_like_dag() -> None:
    lam, facts = figure3()
    graph = LineageGraph(Recorder(lam), facts)
    assert graph.indep(100) == {103, 7, 104, 106}
    assert graph.indep(110) == {1, 2, 9}
    for t in (100, 110):
        assert graph.conf(t).value == pytest.approx(brute_probability(graph.expand(t), facts), abs=1e-12)


@st.composite
def lineage_dags(draw: st.DrawFn) -> tuple[dict[int, Formula], Facts]:
    facts = draw(fact_sets(max_facts=7))
    ids = sorted(facts.probs)
    lam: dict[int, Formula] = {}
    for k in range(draw(st.integers(1, 6))):
        t = (1 << 64) + k  # derived ids never clash with 64-bit base ids
        lam[t] = draw(formulas(ids, 2))
        ids.append(t)
    return lam, facts


def derived_truth(t: int, lam: dict[int, Formula], world: frozenset[int]) -> bool:
    """t in the world where exactly `world` base facts hold (the paper's lineage consistency)."""
    if t not in lam:
        return t in world
    f = lam[t]
    return holds(f, frozenset(v for v in variables(f) if derived_truth(v, lam, world)))


@FAST
@given(lineage_dags())
def test_deep_conf_matches_possible_worlds(dag: tuple[dict[int, Formula], Facts]) -> None:
    lam, facts = dag
    graph = LineageGraph(Recorder(lam), facts)
    for t in lam:
        truth = sum(p for w, p in worlds(facts) if derived_truth(t, lam, w))
        assert graph.conf(t).value == pytest.approx(truth, abs=1e-9)
        assert graph.conf_basic(t).value == pytest.approx(truth, abs=1e-9)


def test_slin_breakpoints() -> None:
    tpch = {
        "OLP": ["LP", "OL"],
        "LP": ["L", "P"],
        "OL": ["O", "L"],
        "L": ["L1", "L2", "L3", "L4"],
        "O": ["O1", "O2", "O3"],
        "P": ["P1", "P2", "P3"],
    }
    assert slin_breakpoints(tpch, set(), "OLP") == {"O", "P", "L1", "L2", "L3", "L4"}  # Figure 7
    conference = {"EA": ["ER", "ER"], "ER": ["A", "E"], "EL": ["A", "A", "E", "E"], "Q": ["ER"]}
    assert slin_breakpoints(conference, set(), "EA") == {"A", "E"}  # δ: one EA tuple, many ER tuples
    assert slin_breakpoints(conference, {"ER"}, "EA") == {"ER"}
    assert slin_breakpoints(conference, set(), "Q") == {"ER"}


# --- checks ----------------------------------------------------------------------------------------


@FAST
@given(problems(dyadic=True), st.data())
def test_checks_match_possible_worlds(problem: tuple[Formula, Facts], data: st.DataObject) -> None:
    f, facts = problem
    g = data.draw(formulas(sorted(facts.probs), 3))
    assert satisfiable(f, facts) == brute_possible(f, facts)
    assert extraneous(f, facts) == (not brute_possible(f, facts))
    assert valid(f, facts) == (not brute_possible(neg(f), facts))
    assert can_coexist(f, g, facts) == brute_possible(conj(f, g), facts)
    differ = disj(conj(f, neg(g)), conj(neg(f), g))
    assert always_together(f, g, facts) == (not brute_possible(differ, facts))


def test_satisfiable_not_fooled_by_floating_point() -> None:
    xs = [Var(i) for i in range(300)]
    facts = Facts(dict.fromkeys(range(300), 0.5))
    nobody = neg(disj(*xs))  # probability 2^-300 rounds to 0.0
    assert exact_probability(nobody, facts) == 0.0 and satisfiable(nobody, facts)
    sevenths = Facts({i: 1 / 7 for i in range(7)}, dict.fromkeys(range(7), "g"))  # sums to 1 - 2e-16
    assert valid(disj(*xs[:7]), sevenths)
    monday, tuesday = Var(61), Var(62)
    ullman = Facts({61: 0.6, 62: 0.3}, {61: "u", 62: "u"})
    assert not can_coexist(monday, tuesday, ullman) and extraneous(conj(monday, tuesday), ullman)


# --- influence -------------------------------------------------------------------------------------


@FAST
@given(problems(max_facts=6, dyadic=True))
def test_influence_matches_brute_force(problem: tuple[Formula, Facts]) -> None:
    f, facts = problem
    vs = sorted(variables(f))
    result = influence(f, facts)
    assert [i.fact for i in result] == sorted(
        vs, key=lambda x: (-abs(next(i.effect for i in result if i.fact == x)), x)
    )
    for i in result:
        others = [v for v in vs if v != i.fact]
        models = model_count(condition(f, i.fact, True), others) - model_count(
            condition(f, i.fact, False), others
        )
        assert i.banzhaf == pytest.approx(models / 2 ** len(others), abs=1e-12)
        assert i.shapley == pytest.approx(brute_shapley(f, vs, i.fact), abs=1e-12)
        if 0 < facts.probs[i.fact] < 1:
            expected = brute_conditional(f, facts, i.fact, True) - brute_conditional(f, facts, i.fact, False)
            assert i.effect == pytest.approx(expected, abs=1e-9)


def brute_shapley(f: Formula, vs: list[int], x: int) -> float:
    """Average marginal contribution of x over all orders of the players."""
    orders = list(itertools.permutations(vs))
    gain = 0
    for order in orders:
        before = frozenset(order[: order.index(x)])
        gain += holds(f, before | {x}) - holds(f, before)
    return gain / len(orders)


def test_influence_running_example() -> None:
    banquet = conj(disj(V[12], V[13]), V[23])
    top = influence(banquet, RUNNING)
    assert [i.fact for i in top] == [23, 12, 13]
    assert top[0].effect == pytest.approx(0.88) and top[0].banzhaf == pytest.approx(0.75)
    assert sum(i.shapley for i in top) == pytest.approx(1.0)  # efficiency: f(all) − f(none)

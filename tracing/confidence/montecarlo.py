"""Sampling estimators: Karp-Luby for DNF lineage (relative error) and naive Monte Carlo (absolute).

Worlds are sampled as a bool matrix in chunks so memory stays bounded whatever the sample count.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from time import perf_counter

import numpy as np

from tracing.confidence.estimate import Estimate
from tracing.confidence.facts import Facts, independent
from tracing.confidence.formula import Const, Formula, Or, literals
from tracing.confidence.vectorised import truth

_CHUNK_CELLS = 1 << 22


def _chunks(total: int, width: int) -> Iterator[int]:
    """Row counts of successive chunks of at most ~_CHUNK_CELLS cells."""
    step = max(1, _CHUNK_CELLS // max(1, width))
    for start in range(0, total, step):
        yield min(step, total - start)


def sample_worlds(vs: Sequence[int], facts: Facts, n: int, rng: np.random.Generator) -> np.ndarray:
    """n worlds over vs (column i is vs[i]); each group picks at most one alternative."""
    worlds = np.empty((n, len(vs)), dtype=bool)
    cols = {v: i for i, v in enumerate(vs)}
    grouped = facts.grouped_in(frozenset(vs))
    in_group = {a for alts in grouped.values() for a in alts}
    free = [v for v in vs if v not in in_group]
    if free:
        p = np.array([facts.prob(v) for v in free])
        worlds[:, [cols[v] for v in free]] = rng.random((n, len(free))) < p
    for alts in grouped.values():
        cum = np.cumsum([facts.prob(a) for a in alts])
        pick = np.searchsorted(cum, rng.random(n), side="right")  # len(alts): none chosen
        for i, a in enumerate(alts):
            worlds[:, cols[a]] = pick == i
    return worlds


def dnf_clauses(f: Formula) -> list[dict[int, bool]] | None:
    """f as clauses of literals (var -> polarity) when it is a DNF, else None; FALSE is no clause."""
    if isinstance(f, Const):
        return None if f.value else []
    parts = f.children if isinstance(f, Or) else (f,)
    clauses = [literals(p) for p in parts]
    return None if any(c is None for c in clauses) else clauses  # type: ignore[return-value]


def naive_monte_carlo(f: Formula, facts: Facts, epsilon: float, delta: float, seed: int) -> Estimate:
    """Fraction of sampled worlds satisfying f; Hoeffding gives the absolute (epsilon, delta) bound."""
    start = perf_counter()
    n = math.ceil(math.log(2.0 / delta) / (2.0 * epsilon**2))
    vs = sorted(f.vars)
    cols = {v: i for i, v in enumerate(vs)}
    rng = np.random.default_rng(seed)
    hits = 0
    for size in _chunks(n, len(vs)):
        hits += int(np.count_nonzero(truth(f, cols, sample_worlds(vs, facts, size, rng))))
    return Estimate(hits / n, "monte-carlo", epsilon, delta, "absolute", n, perf_counter() - start)


def karp_luby(clauses: Formula, facts: Facts, epsilon: float, delta: float, seed: int) -> Estimate:
    """Karp-Luby-Madras estimator for a DNF (after the Lemma 6.1 rewrite), relative (epsilon, delta).

    Pick clause i with probability P(C_i)/U (U = sum of clause probabilities), a world given C_i, and
    score 1 when i is the first clause the world satisfies: the mean times U is unbiased for P(f), and
    N = ceil(4 m ln(2/delta) / epsilon^2) samples give the relative bound (m clauses).
    """
    start = perf_counter()
    g, ind = independent(clauses, facts)
    cls = dnf_clauses(g)
    if cls is None:
        raise ValueError("karp_luby needs a DNF of literals (after the Lemma 6.1 rewrite)")
    weights = np.array(
        [math.prod(ind.prob(v) if pos else 1.0 - ind.prob(v) for v, pos in c.items()) for c in cls]
    )
    total = float(weights.sum())
    if not cls or total == 0.0:
        return Estimate(0.0, "karp-luby", epsilon, delta, "relative", 0, perf_counter() - start)
    vs = sorted(g.vars)
    cols = {v: i for i, v in enumerate(vs)}
    lens = np.array([len(c) for c in cls])
    offsets = np.concatenate(([0], np.cumsum(lens)[:-1]))
    lit_var = np.array([cols[v] for c in cls for v in c])
    lit_val = np.array([pos for c in cls for pos in c.values()])
    probs = np.array([ind.prob(v) for v in vs])
    m = len(cls)
    n = math.ceil(4.0 * m * math.log(2.0 / delta) / epsilon**2)
    rng = np.random.default_rng(seed)
    hits = 0
    for size in _chunks(n, len(lit_var) + len(vs)):
        pick = rng.choice(m, size=size, p=weights / total)
        worlds = rng.random((size, len(vs))) < probs
        counts = lens[pick]
        rows = np.repeat(np.arange(size), counts)
        lit = np.repeat(offsets[pick] - (np.cumsum(counts) - counts), counts) + np.arange(counts.sum())
        worlds[rows, lit_var[lit]] = lit_val[lit]
        sat = np.logical_and.reduceat(worlds[:, lit_var] == lit_val, offsets, axis=1)
        hits += int(np.count_nonzero(sat.argmax(axis=1) == pick))
    value = min(1.0, total * hits / n)
    return Estimate(value, "karp-luby", epsilon, delta, "relative", n, perf_counter() - start)

"""Tuple-level confidences of output rows (Trio Algorithms 1 and 2 over a run's lineage).

An output row as the user sees it may stand for several root rows (hidden columns, or a
root without duplicate elimination): it exists when any of them does, so it gets a virtual
variable whose formula is the disjunction of theirs.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import partial
from time import perf_counter
from typing import Any

from tracing.confidence.answer import ConfidenceAnswer, FactWeight, RowConfidence
from tracing.confidence.deep import LineageGraph
from tracing.confidence.formula import Formula, Var, disj, render
from tracing.confidence.influence import influence
from tracing.confidence.probability import probability
from tracing.confidence.store import FormulaStore

ALGORITHMS = ("indep", "basic")
EXPLAIN_FACTS = 64  # weights cost two exact evaluations per fact: only for formulas this small
RENDER_FACTS = 200
_VIRTUAL = -(1 << 62)  # virtual ids count up from here: far from the 64-bit hashes in practice

Target = tuple[dict[str, Any], Sequence[int]]  # visible row values, its root variables


def target_graph(
    store: FormulaStore, targets: Sequence[Target], **options: Any
) -> tuple[LineageGraph, list[int]]:
    """The lineage DAG of the run, with one (possibly virtual) variable per target row."""
    virtual: dict[int, Formula] = {}
    ids = []
    for i, (_, root_vars) in enumerate(targets):
        if len(root_vars) == 1:
            ids.append(root_vars[0])
        else:
            virtual[_VIRTUAL + i] = disj(*[Var(v) for v in root_vars])
            ids.append(_VIRTUAL + i)

    def lam(xs: Collection[int]) -> dict[int, Formula]:
        found = store.lam([x for x in xs if x not in virtual])
        found.update({x: virtual[x] for x in xs if x in virtual})
        return found

    return LineageGraph(lam, store.facts, partial(probability, **options)), ids


def expanded(store: FormulaStore, targets: Sequence[Target]) -> list[Formula]:
    """Each target row's lineage over base facts (for the Trio checks)."""
    graph, ids = target_graph(store, targets)
    graph.load(ids)
    return [graph.expand(t) for t in ids]


def row_confidences(
    store: FormulaStore,
    targets: Sequence[Target],
    algorithm: str = "indep",
    explain: int = 3,
    **options: Any,
) -> ConfidenceAnswer:
    """The probability of each target row; ``explain`` > 0 also names its weightiest facts.

    ``algorithm``: ``indep`` (Algorithm 2: break the expansion at independent derived rows
    and memoize their confidences) or ``basic`` (Algorithm 1: expand to base facts first).
    ``options`` go to :func:`probability` (method, epsilon, delta, seed, budget)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}, not {algorithm!r}")
    started = perf_counter()
    graph, ids = target_graph(store, targets, **options)
    graph.load(ids)  # every row's DAG in one lookup per level
    rows = []
    labels = store.labels
    for (row, _), t in zip(targets, ids):
        estimate = graph.conf(t) if algorithm == "indep" else graph.conf_basic(t)
        formula = graph.expand(t)
        n = len(formula.vars)
        text = render(formula, lambda v: labels.get(v, str(v))) if n <= RENDER_FACTS else f"<{n} facts>"
        weights: tuple[FactWeight, ...] = ()
        if explain and n <= EXPLAIN_FACTS:
            weights = tuple(
                FactWeight(labels[w.fact], store.kinds[w.fact], w.probability, w.effect, w.banzhaf)
                for w in influence(formula, store.facts)[:explain]
            )
        rows.append(RowConfidence(row, estimate, text, n, weights))
    notes = []
    if any(r.estimate.samples and r.estimate.bound is None for r in rows):
        notes.append(
            "some probabilities were sampled at independent break points: their (ε, δ) guarantees "
            "do not compose, so none is stated; algorithm='basic' samples the whole formula once"
        )
    if explain and any(r.facts > EXPLAIN_FACTS for r in rows):
        notes.append(f"fact weights are given for rows whose lineage has at most {EXPLAIN_FACTS} facts")
    return ConfidenceAnswer(rows, algorithm, perf_counter() - started, store.lookups, notes)

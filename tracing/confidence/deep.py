"""Deep lineage: confidences of derived facts whose lineage refers to other derived facts.

`LineageGraph` implements the paper's Algorithm 1 (expand to base facts), Algorithm 3 (Indep(t) on
Lin(t)) and Algorithm 2 (expand only to Indep(t), recurse, memoize); `slin_breakpoints` is the
schema-level approximation of section 4.2.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence, Set
from functools import cache
from time import perf_counter
from typing import TypeVar

from tracing.confidence.estimate import Estimate
from tracing.confidence.facts import Facts
from tracing.confidence.formula import Formula, Var, substitute
from tracing.confidence.probability import probability

_SAMPLED = ("karp-luby", "monte-carlo")

Lookup = Callable[[Collection[int]], Mapping[int, Formula]]


N = TypeVar("N", int, str)


def _closest(
    start: Iterable[N], children: Callable[[N], Iterable[N]], breaks: Callable[[N], bool]
) -> frozenset[N]:
    """Walking down from start, the first nodes on every path where `breaks` holds (Algorithm 3's union)."""
    found: set[N] = set()
    visited: set[N] = set()
    todo = list(start)
    while todo:
        n = todo.pop()
        if n not in visited:
            visited.add(n)
            if breaks(n):
                found.add(n)
            else:
                todo.extend(children(n))
    return frozenset(found)


class LineageGraph:
    """The lineage DAG of derived facts over base `facts`, fetched lazily through `lam`.

    `lam(ids)` returns λ for the ids that are derived (absent ids are base facts). It is called once
    per BFS level of ids not seen before, so a caller can answer each level with one query.
    `evaluate` computes one formula's probability (e.g. `functools.partial(probability, method="exact")`).
    `lam_calls` and `evaluations` (calls of `evaluate`) count the work, for tests and reports.
    """

    def __init__(
        self,
        lam: Lookup,
        facts: Facts,
        evaluate: Callable[[Formula, Facts], Estimate] = probability,
    ) -> None:
        self.facts = facts
        self.lineage: dict[int, Formula] = {}
        self.lam_calls = 0
        self.evaluations = 0
        self._lam = lam
        self._evaluate = evaluate
        self._seen: set[int] = set()
        self._expanded: dict[int, Formula] = {}
        self._confs: dict[int, Estimate] = {}

    def load(self, ts: Iterable[int]) -> None:
        """Fetch the lineage DAG below ``ts``, one ``lam`` call per level for all of them."""
        frontier = {t for t in ts if t not in self._seen}
        while frontier:
            self._seen |= frontier
            found = self._lam(sorted(frontier))
            self.lam_calls += 1
            below: set[int] = set()
            for t in frontier:
                f = found.get(t)
                if f is not None and f != Var(t):  # λ(t) = t marks a base fact too
                    self.lineage[t] = f
                    below |= f.vars
            frontier = below - self._seen

    def _children(self, t: int) -> frozenset[int]:
        f = self.lineage.get(t)
        return frozenset() if f is None else f.vars

    def _unfold(self, f: Formula, stop: Set[int], memo: dict[int, Formula]) -> Formula:
        """f with every derived variable outside `stop` replaced by its (recursively unfolded) lineage."""
        mapping: dict[int, Formula] = {}
        for v in f.vars:
            if v in stop or v not in self.lineage:
                continue
            if v not in memo:
                memo[v] = self._unfold(self.lineage[v], stop, memo)
            mapping[v] = memo[v]
        return substitute(f, mapping) if mapping else f

    def expand(self, t: int) -> Formula:
        """t's lineage expanded all the way to base facts (memoized across calls)."""
        self.load([t])
        return Var(t) if t not in self.lineage else self._unfold(self.lineage[t], frozenset(), self._expanded)

    def conf_basic(self, t: int) -> Estimate:
        """Algorithm 1: probability of the fully expanded lineage."""
        self.evaluations += 1
        return self._evaluate(self.expand(t), self.facts)

    def _group_counts(self, nodes: Iterable[int]) -> Counter[Hashable]:
        """Base facts per mutually exclusive group among nodes."""
        groups = self.facts.groups
        return Counter(groups[n] for n in nodes if n not in self.lineage and n in groups)

    def indep(self, t: int) -> frozenset[int]:
        """Algorithm 3: the break points of Lin(t) closest to t whose subtrees are disjoint from the rest.

        A node qualifies when no node below it has a parent outside its subtree and, because alternatives
        of one x-tuple are dependent, its base facts share no group with base facts of Lin(t) outside it.
        Base facts always qualify (their groups are handled by Lemma 6.1 when the break points combine).
        """
        self.load([t])
        parents: dict[int, set[int]] = {t: set()}
        todo = [t]
        while todo:
            n = todo.pop()
            for c in self._children(n):
                if c not in parents:
                    parents[c] = set()
                    todo.append(c)
                parents[c].add(n)
        below: dict[int, frozenset[int]] = {}

        def subtree(n: int) -> frozenset[int]:
            if n not in below:
                below[n] = frozenset({n}).union(*(subtree(c) for c in self._children(n)))
            return below[n]

        group_size = self._group_counts(parents)

        def disjoint(c: int) -> bool:
            inside = subtree(c)
            if any(not parents[d] <= inside for d in inside if d != c):
                return False
            inner = self._group_counts(inside)
            return c not in self.lineage or all(group_size[g] == k for g, k in inner.items())

        return _closest(self._children(t), self._children, disjoint)

    def conf(self, t: int) -> Estimate:
        """Algorithm 2: expand to Indep(t), take the break points' confidences recursively, combine.

        Every result is memoized. Break-point values enter the final evaluation as if exact. The method
        reported is the weakest used: a sampled break point's method, with no bound (guarantees do not
        compose), else "exact" when any step was.
        """
        done = self._confs.get(t)
        if done is not None:
            return done
        start = perf_counter()
        self.load([t])
        if t not in self.lineage:
            est = Estimate(self.facts.prob(t), "trivial")
        else:
            f = self._unfold(self.lineage[t], self.indep(t), {})
            parts = {s: self.conf(s) for s in sorted(f.vars)}
            known = self.facts.groups
            groups = {s: known[s] for s in parts if s in known and s not in self.lineage}
            self.evaluations += 1
            est = self._evaluate(f, Facts({s: e.value for s, e in parts.items()}, groups))
            methods = [est.method, *(e.method for e in parts.values())]
            sampled = [m for m in methods if m in _SAMPLED]
            if any(e.method in _SAMPLED for e in parts.values()):
                est = dataclasses.replace(est, method=sampled[0], epsilon=None, delta=None, bound=None)
            elif "exact" in methods:
                est = dataclasses.replace(est, method="exact")
        est = dataclasses.replace(est, seconds=perf_counter() - start)
        self._confs[t] = est
        return est

    def conf_many(self, ts: Iterable[int]) -> dict[int, Estimate]:
        """Confidences of many facts: one shared BFS of their lineage, one shared memo."""
        ts = list(ts)
        self.load(ts)
        return {t: self.conf(t) for t in ts}


def slin_breakpoints(schema_edges: Mapping[str, Sequence[str]], ind: Set[str], root: str) -> frozenset[str]:
    """Indep(root) on the schema-level lineage graph SLin (section 4.2): relations to break at.

    `schema_edges[R]` lists the input relations of the query that produced R, an input listed twice when
    one R tuple may refer to several of its tuples (two plan paths, or δ, −, ∩, α on the path: the
    paper's copies of a DEP subgraph). Relations with no inputs are base (IND). `ind` names relations
    whose distinct tuples never share base data.

    Conservative rule: walking down from root, relation R is a break point when (1) every path from
    root to a relation below R passes through R, so R's tuples share no base data with the rest of the
    expansion, and (2) distinct R tuples under one root tuple are independent: R is IND or base, or
    root reaches R by exactly one path (so each root tuple refers to a single R tuple). Otherwise the
    walk continues into R's inputs.
    """

    def inputs(r: str) -> Sequence[str]:
        return schema_edges.get(r, ())

    @cache
    def paths(src: str, dst: str) -> int:
        return 1 if src == dst else sum(paths(i, dst) for i in inputs(src))

    @cache
    def closure(r: str) -> frozenset[str]:
        return frozenset({r}).union(*(closure(i) for i in inputs(r)))

    def breaks(r: str) -> bool:
        if not inputs(r):
            return True
        reach = paths(root, r)
        shared = any(paths(root, x) != reach * paths(r, x) for x in closure(r) - {r})
        return not shared and (r in ind or reach == 1)

    return _closest(inputs(root), inputs, breaks)

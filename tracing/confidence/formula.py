"""Immutable, hashable boolean lineage formulas over integer fact ids.

Formulas are values: equal formulas hash equal, so they serve as memo keys in the evaluators.
Each node carries its variable set (computed once at construction) because decomposition and
expansion ask for it over and over.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Const:
    """TRUE or FALSE; use the module constants rather than building new ones."""

    value: bool
    vars: frozenset[int] = field(default=frozenset(), init=False, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Var:
    """A fact (base or derived tuple) by its id; ids are 64-bit and may be negative."""

    id: int
    vars: frozenset[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "vars", frozenset((self.id,)))


@dataclass(frozen=True, slots=True)
class Not:
    child: Formula
    vars: frozenset[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "vars", self.child.vars)


@dataclass(frozen=True, slots=True)
class _Junction:
    """Shared shape of And and Or (equality still tells them apart by class)."""

    children: frozenset[Formula]
    vars: frozenset[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "vars", frozenset().union(*(c.vars for c in self.children)))


@dataclass(frozen=True, slots=True)
class And(_Junction):
    pass


@dataclass(frozen=True, slots=True)
class Or(_Junction):
    pass


Formula = Const | Var | Not | And | Or

TRUE = Const(True)
FALSE = Const(False)


def _junction(kind: type[And] | type[Or], fs: tuple[Formula, ...]) -> Formula:
    """Flattened And/Or: neutral elements dropped, absorbing element or x with ¬x short-circuits."""
    neutral, absorbing = (TRUE, FALSE) if kind is And else (FALSE, TRUE)
    children: set[Formula] = set()
    for f in fs:
        if f == absorbing:
            return absorbing
        if isinstance(f, kind):
            children.update(f.children)
        elif f != neutral:
            children.add(f)
    if any(isinstance(c, Not) and c.child in children for c in children):
        return absorbing
    if not children:
        return neutral
    if len(children) == 1:
        return next(iter(children))
    return kind(frozenset(children))


def conj(*fs: Formula) -> Formula:
    return _junction(And, fs)


def disj(*fs: Formula) -> Formula:
    return _junction(Or, fs)


def neg(f: Formula) -> Formula:
    if isinstance(f, Const):
        return FALSE if f.value else TRUE
    if isinstance(f, Not):
        return f.child
    return Not(f)


def variables(f: Formula) -> frozenset[int]:
    return f.vars


def holds(f: Formula, true_vars: set[int] | frozenset[int]) -> bool:
    """Truth of f in the world where exactly true_vars hold."""
    if isinstance(f, Var):
        return f.id in true_vars
    if isinstance(f, Const):
        return f.value
    if isinstance(f, Not):
        return not holds(f.child, true_vars)
    if isinstance(f, And):
        return all(holds(c, true_vars) for c in f.children)
    return any(holds(c, true_vars) for c in f.children)


def substitute(f: Formula, mapping: Mapping[int, Formula]) -> Formula:
    """Replace variables by formulas (lineage expansion), simplifying on the way up."""
    memo: dict[Formula, Formula] = {}

    def go(g: Formula) -> Formula:
        if g.vars.isdisjoint(mapping.keys()):
            return g
        done = memo.get(g)
        if done is not None:
            return done
        if isinstance(g, Var):
            out = mapping[g.id]
        elif isinstance(g, Not):
            out = neg(go(g.child))
        elif isinstance(g, And):
            out = conj(*(go(c) for c in g.children))
        else:
            assert isinstance(g, Or)
            out = disj(*(go(c) for c in g.children))
        memo[g] = out
        return out

    return go(f)


def condition(f: Formula, var: int, value: bool) -> Formula:
    """f with var fixed to value (a Shannon cofactor)."""
    return substitute(f, {var: TRUE if value else FALSE})


def literals(f: Formula) -> dict[int, bool] | None:
    """The literals of a conjunction of literals (var -> polarity), or None when f is not one."""
    parts = f.children if isinstance(f, And) else (f,)
    out: dict[int, bool] = {}
    for p in parts:
        if isinstance(p, Var):
            out[p.id] = True
        elif isinstance(p, Not) and isinstance(p.child, Var):
            out[p.child.id] = False
        else:
            return None
    return out


def render(f: Formula, name: Callable[[int], str] = str) -> str:
    """Readable text with ∧ ∨ ¬; operands sorted by their text so the output is deterministic."""

    def go(g: Formula, nested: bool) -> str:
        if isinstance(g, Var):
            return name(g.id)
        if isinstance(g, Const):
            return "⊤" if g.value else "⊥"
        if isinstance(g, Not):
            return "¬" + go(g.child, True)
        op = " ∧ " if isinstance(g, And) else " ∨ "
        text = op.join(sorted(go(c, True) for c in g.children))
        return f"({text})" if nested else text

    return go(f, False)

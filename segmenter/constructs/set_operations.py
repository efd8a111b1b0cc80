"""∪ and −, and INTERSECT defined by them: distinct(T₁ ⋉ T₂ on every column)."""

from __future__ import annotations

from segmenter.constructs.aggregations import distinct
from segmenter.errors import UnsupportedTaskError
from segmenter.operators import Difference, Expr, Join, Node, Union
from segmenter.plan_reader import JObj, PlanReader, Rule


def read_union(p: PlanReader, plan: JObj) -> Node:
    inputs = tuple(p.node(c) for c in p.items(plan.children()))
    return Union(inputs, p.cols(plan))


def read_intersect(p: PlanReader, plan: JObj) -> Node:
    """T₁ ∩ T₂ = distinct(T₁ ⋉ T₂ on every column, NULL matching NULL) (docs/semantics.md)."""
    if plan.isAll():
        raise UnsupportedTaskError(
            "INTERSECT ALL",
            p.where(),
            "write INTERSECT (distinct rows) or a LEFT SEMI JOIN on the columns that must agree",
        )
    left, right = p.node(plan.left()), p.node(plan.right())
    pairs = zip(left.match_columns(), right.match_columns(), strict=True)
    condition = tuple(Expr(f"(`{a.id}` <=> `{b.id}`)", frozenset({a.id, b.id})) for a, b in pairs)
    return distinct(Join((left, right), condition, semi=True))


def read_except(p: PlanReader, plan: JObj) -> Node:
    left = p.node(plan.left())
    right = p.node(plan.right())
    return Difference(left, right, "all" if plan.isAll() else "distinct")


RULES: dict[str, Rule] = {"Union": read_union, "Intersect": read_intersect, "Except": read_except}

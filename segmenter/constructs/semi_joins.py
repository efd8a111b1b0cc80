"""⋉ and ▷: LEFT SEMI JOIN (EXISTS, IN) is ⋈'s semi form; LEFT ANTI JOIN (NOT EXISTS,
NOT IN) is defined by it, T₁ ▷ T₂ = T₁ − (T₁ ⋉ T₂), and traced as that difference: its
right side's matched rows are the control rows of a row it keeps (docs/semantics.md)."""

from __future__ import annotations

from segmenter.operators import Difference, Expr, Join, Node
from segmenter.plan_reader import JObj, PlanReader


def anti(left: Node, right: Node, condition: tuple[Expr, ...]) -> Difference:
    """T₁ ▷ T₂ = T₁ − (T₁ ⋉ T₂): the left rows no right row matches, duplicates kept."""
    return Difference(left, Join((left, right), condition, semi=True), "anti")


def _semi(p: PlanReader, plan: JObj, left: Node, right: Node, condition: tuple[Expr, ...]) -> Node:
    return Join((left, right), condition, semi=True)


def _anti(p: PlanReader, plan: JObj, left: Node, right: Node, condition: tuple[Expr, ...]) -> Node:
    return anti(left, right, condition)


JOIN_TYPES = {"LeftSemi": _semi, "LeftAnti": _anti}

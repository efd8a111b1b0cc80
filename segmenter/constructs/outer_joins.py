"""⟕ ⟖ ⟗ and Spark's existence join, kept as one operator (:class:`OuterJoin`).

Its definition is :func:`rewrite`, into the seven operators (docs/semantics.md): the oracle
checks against it, and the capturing backends (eager, compressed, confidence), whose indexes
and formulas are built for the seven, run it. The lazy engines evaluate the operator as one
join and trace it in one step (``tracing.queries.trace_outer``): a matched row's two input
rows, a padded row's own row, and T₁ ⋉ T₂ once as control for the padded rows.
"""

from __future__ import annotations

from segmenter.constructs.semi_joins import anti
from segmenter.operators import Expr, Join, Node, OuterJoin, Projection, Union, column_expr
from segmenter.plan_reader import JObj, PlanReader

# Spark's outer join types -> OuterJoin's kind
_OUTER = {"LeftOuter": "left", "RightOuter": "right", "FullOuter": "full"}


def _outer(p: PlanReader, plan: JObj, left: Node, right: Node, condition: tuple[Expr, ...]) -> Node:
    join_type = plan.joinType().toString()
    if join_type in _OUTER:
        joined = OuterJoin(left, right, condition, _OUTER[join_type])
    else:  # ExistenceJoin(exists#n): EXISTS/IN under OR or in a SELECT list, a flag per left row
        joined = OuterJoin(left, right, condition, "exists", p.attr_col(plan.joinType().exists()))
    shown = p.cols(plan)
    if [c.id for c in shown] == [c.id for c in joined.columns]:
        return joined
    renamed = zip(shown, joined.columns, strict=True)
    return Projection(joined, tuple((s, column_expr(o)) for s, o in renamed))


def rewrite(node: OuterJoin) -> Union:
    """T₁ ⟕ T₂ = (T₁ ⋈ T₂) ∪ π_{T₁, NULL…}(T₁ ▷ T₂); ⟖ pads T₂'s unmatched rows, ⟗ both;
    Spark's existence join, T₁ with a flag telling whether a T₂ row matches, is
    π_{T₁, TRUE}(T₁ ⋉ T₂) ∪ π_{T₁, FALSE}(T₁ ▷ T₂)."""
    if node.flag is not None:
        shown = tuple((c, column_expr(c)) for c in node.left.match_columns())
        semi = Join((node.left, node.right), node.condition, semi=True)
        flagged = tuple(
            Projection(rows, (*shown, (node.flag, Expr(value, frozenset()))))
            for rows, value in ((semi, "true"), (anti(node.left, node.right, node.condition), "false"))
        )
        return Union(flagged, node.columns)
    inner = Join((node.left, node.right), node.condition)
    branches: list[Node] = [inner]
    sides = (node.left, node.right)
    for kept in node.kept:
        unmatched = anti(sides[kept], sides[1 - kept], node.condition)
        shown = {c.id for c in sides[kept].match_columns()}
        outputs = tuple(
            (c, column_expr(c) if c.id in shown else Expr(f"CAST(NULL AS {c.dtype})", frozenset()))
            for c in node.columns
        )
        branches.append(Projection(unmatched, outputs))
    return Union(tuple(branches), node.columns)


JOIN_TYPES = {**{t: _outer for t in _OUTER}, "ExistenceJoin": _outer}

"""Relations: a source read in place or registered, and a WITH body inlined at each reference."""

from __future__ import annotations

from segmenter.operators import Node, Projection, column_expr
from segmenter.plan_reader import JObj, PlanReader, Rule, visible


def read_logicalrelation(p: PlanReader, plan: JObj) -> Node:
    view, p.view = p.view, None
    return p.sources.leaf(plan, p.cols(plan), view)


def read_cterelationref(p: PlanReader, plan: JObj) -> Node:
    """Inline the WITH body; each reference gets its own column ids."""
    with p.own_ids():
        body = p.node(p.ctes[plan.cteId()])
    outputs = tuple(
        (p.attr_col(ref), column_expr(col))
        for ref, col in zip(p.items(plan.output()), visible(body), strict=True)
    )
    return Projection(body, outputs)


def read_withcte(p: PlanReader, plan: JObj) -> Node:
    p.remember_ctes(plan)
    return p.node(plan.plan())


RULES: dict[str, Rule] = {
    "LogicalRelation": read_logicalrelation,
    "CTERelationRef": read_cterelationref,
    "WithCTE": read_withcte,
}

"""ε: ROLLUP, CUBE and GROUPING SETS, kept as Spark's expansion of each input row once per
grouping set under the α that aggregates them (docs/semantics.md)."""

from __future__ import annotations

from segmenter.operators import Expand, Node
from segmenter.plan_reader import JObj, PlanReader, Rule


def read_expand(p: PlanReader, plan: JObj) -> Node:
    """ROLLUP/CUBE/GROUPING SETS: Spark expands each input row once per grouping set (the
    keys left out as NULL, the set's number as ``spark_grouping_id``) and aggregates by
    all of them; ε keeps the expansion as one operator over T (docs/semantics.md)."""
    projections = tuple(tuple(p.expr(e) for e in p.items(items)) for items in p.items(plan.projections()))
    return Expand(p.node(plan.child()), projections, p.cols(plan))


RULES: dict[str, Rule] = {"Expand": read_expand}

"""⋈: Spark's Join node, read once (inputs, condition), then by its join type: an inner or
cross join here (nested inner joins flattened into one n-ary ⋈, a model in the condition as
φ then σ over the pairs), semi and anti joins in :mod:`semi_joins`, outer and existence
joins in :mod:`outer_joins`."""

from __future__ import annotations

from collections.abc import Callable

from segmenter.constructs import outer_joins, semi_joins
from segmenter.constructs.selections import filtered
from segmenter.errors import UnsupportedTaskError
from segmenter.operators import Expr, Join, Node
from segmenter.plan_reader import JObj, PlanReader, Rule

# a join type's reading: (reader, the Join plan node, left, right, its condition) -> the node
JoinRule = Callable[[PlanReader, JObj, Node, Node, tuple[Expr, ...]], Node]


def read_join(p: PlanReader, plan: JObj) -> Node:
    join_type = plan.joinType().toString().split("(")[0]  # ExistenceJoin(exists#7)
    cond = plan.condition()
    left = p.node(plan.left())
    right = p.node(plan.right())
    conjuncts = p.split_and(cond.get()) if cond.isDefined() else []
    on_udfs = [c for c in conjuncts if p.udf_calls([c])]
    if on_udfs and join_type not in ("Inner", "Cross"):
        raise UnsupportedTaskError(
            "UDF call in the condition of an outer, semi or anti join",
            p.where(),
            "apply the UDF in a select/withColumn before the join",
        )
    condition = tuple(p.expr(c) for c in conjuncts if not p.udf_calls([c]))
    if join_type in ("Inner", "Cross"):
        joined = inner_join(left, right, condition)
        # a model in the condition: φ over the pairs the plain conditions keep, then σ
        return filtered(p, joined, on_udfs) if on_udfs else joined
    return JOIN_TYPES[join_type](p, plan, left, right, condition)


def inner_join(left: Node, right: Node, condition: tuple[Expr, ...]) -> Join:
    """One n-ary ⋈ over both sides' inputs where a side is itself an inner join."""
    inputs: list[Node] = []
    conds: list[Expr] = []
    for side in (left, right):
        if isinstance(side, Join) and not side.semi:
            inputs += side.inputs
            conds += side.condition
        else:
            inputs.append(side)
    return Join(tuple(inputs), tuple(conds) + condition)


JOIN_TYPES: dict[str, JoinRule] = {**semi_joins.JOIN_TYPES, **outer_joins.JOIN_TYPES}
RULES: dict[str, Rule] = {"Join": read_join}

"""π: a SELECT list, with one φ per model call below it (a φ alone where π only appends
the calls' values)."""

from __future__ import annotations

from segmenter.constructs.selections import scalar_subqueries
from segmenter.operators import Join, Node, Projection
from segmenter.plan_reader import JObj, PlanReader, Rule


def read_project(p: PlanReader, plan: JObj) -> Node:
    items = p.items(plan.projectList())
    child = p.node(plan.child())
    scalars = scalar_subqueries(p, items)
    if scalars:  # SELECT …, (SELECT agg …): each row with the one-row results, as in WHERE
        child = Join((child, *scalars), ())
    udf_calls = p.udf_calls(items)
    aliases = {
        p.udf_key(i.child()): p.attr_col(i.toAttribute())
        for i in items
        if i.getClass().getSimpleName() == "Alias" and i.child().getClass().getSimpleName() == "PythonUDF"
    }
    node, udf_cols = p.functions(child, udf_calls, aliases)
    # one column per id: Spark lists a window's values twice in the projection above it
    unique = {p.attr_id(i.toAttribute()): i for i in items}.values()
    outputs = tuple((p.attr_col(i.toAttribute()), p.item_expr(i, udf_cols)) for i in unique)
    visible = tuple(c for c in node.columns if not c.is_reason)
    if tuple(c for c, _ in outputs) == visible and all(e.is_column() == c.id for c, e in outputs):
        return node  # the projection only appends UDF values: φ alone (Definition 4)
    return Projection(node, outputs)


RULES: dict[str, Rule] = {"Project": read_project}

"""α: GROUP BY (a pivot's per-value columns included), DISTINCT as α over every column, and
dropDuplicates on every column as DISTINCT."""

from __future__ import annotations

from typing import Any

from segmenter.errors import UnsupportedTaskError
from segmenter.operators import Aggregation, Col, Expr, Node, Projection, column_expr
from segmenter.plan_reader import JObj, PlanReader, Rule


def read_aggregate(p: PlanReader, plan: JObj) -> Node:
    child = p.node(plan.child())
    groups = p.items(plan.groupingExpressions())
    items = p.items(plan.aggregateExpressions())
    calls = p.udf_calls(groups + items)
    node, udf_cols = p.functions(child, calls, {}) if calls else (child, {})
    outputs = [pair for i in items for pair in _aggregate_outputs(p, i, udf_cols)]
    shown = [c for c, _ in outputs]
    key_ids: list[str] = []
    hidden = False
    for g in groups:
        g_expr = p.expr(g, udf_cols)
        match = next((c for c, e in outputs if e.sql == g_expr.sql), None)
        if match is None:
            match = p.hidden("group_key", g)
            outputs.append((match, g_expr))
            hidden = True
        if match.id not in key_ids:  # GROUP BY d_year, …, d_year (TPC-DS q11): one key
            key_ids.append(match.id)
    agg = Aggregation(node, tuple(outputs), tuple(key_ids))
    if not hidden:
        return agg
    return Projection(agg, tuple((c, column_expr(c)) for c in shown))


def _aggregate_outputs(p: PlanReader, item: JObj, udf_cols: dict[str, Col]) -> list[tuple[Col, Expr]]:
    """An aggregate's output column; for Spark's ``PivotFirst`` (an array: per pivot value
    the value of the group's one row with it, Spark grouped by the pivot column below),
    one column per pivot value, ``max(IF(p <=> v, x, NULL))`` (exact: at most one row
    has v), which the projection above reads instead of the array's elements."""
    inner = item.child() if item.getClass().getSimpleName() == "Alias" else item
    aggregate = inner.getClass().getSimpleName() == "AggregateExpression"
    pivot = inner.aggregateFunction() if aggregate else None
    if pivot is None or pivot.getClass().getSimpleName() != "PivotFirst":
        return [(p.attr_col(item.toAttribute()), p.item_expr(item, udf_cols))]
    ex = p.jvm.org.apache.spark.sql.catalyst.expressions
    column, value = pivot.pivotColumn(), pivot.valueColumn()
    missing = ex.Literal(None, value.dataType())
    values = [_literal(p, v, column.dataType()) for v in p.items(pivot.pivotColumnValues())]
    picks = [
        ex.aggregate.Max(ex.If(ex.EqualNullSafe(column, v), value, missing)).toAggregateExpression()
        for v in values
    ]
    cols = [p.hidden(f"pivot{k}", pick) for k, pick in enumerate(picks)]
    p.pivots[p.attr_id(item.toAttribute())] = cols
    return [(c, p.expr(pick, udf_cols)) for c, pick in zip(cols, picks, strict=True)]


def _literal(p: PlanReader, value: Any, dtype: JObj) -> JObj:
    """A literal for a value py4j brought back from the JVM: an object (a string or a
    decimal) or a date's days with its type; a number or boolean (py4j made it Python's)
    with the type Spark gives the Python value, which Spark coerces where it reads the
    SQL back, as it coerced the value written in the task."""
    ex = p.jvm.org.apache.spark.sql.catalyst.expressions
    if isinstance(value, bool | int | float) and dtype.typeName() not in ("date", "timestamp"):
        return getattr(getattr(ex, "Literal$"), "MODULE$").apply(value)
    return ex.Literal(value, dtype)


def read_distinct(p: PlanReader, plan: JObj) -> Node:
    return distinct(p.node(plan.child()))


def read_deduplicate(p: PlanReader, plan: JObj) -> Node:
    keys = {k.exprId().id() for k in p.items(plan.keys())}
    if keys != {a.exprId().id() for a in p.items(plan.child().output())}:
        raise UnsupportedTaskError(
            "dropDuplicates on a subset of columns",
            p.where(),
            "it keeps an arbitrary row per key; use distinct() or GROUP BY",
        )
    return read_distinct(p, plan)


def distinct(child: Node) -> Aggregation:
    """δ as α grouping by every column."""
    cols = child.match_columns()
    return Aggregation(child, tuple((c, column_expr(c)) for c in cols), tuple(c.id for c in cols))


RULES: dict[str, Rule] = {
    "Aggregate": read_aggregate,
    "Distinct": read_distinct,
    "Deduplicate": read_deduplicate,
}

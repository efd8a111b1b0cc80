"""σ: a WHERE clause, its model calls placed above its plain conjuncts, its uncorrelated
scalar subqueries joined as one-row inputs, and the conjuncts beside a decorrelated
subquery, or over an outer join and reading only its kept side (with no model call), moved
below that join."""

from __future__ import annotations

from segmenter.operators import Aggregation, Col, Expr, Join, Node, Projection, Selection, column_expr
from segmenter.plan_reader import JObj, PlanReader, Rule, visible

# joins whose rows are left rows, with or without more: a filter on the left commutes with them
_LEFT_KEEPING = ("LeftOuter", "LeftSemi", "LeftAnti", "ExistenceJoin")


def models_last(p: PlanReader, plan: JObj) -> JObj:
    """``plan`` with each WHERE that holds both a subquery and a conjunct calling a model
    split in two, the model's conjuncts above: Spark's decorrelation puts a WHERE's other
    conjuncts below the semi, anti or outer join it makes of the subquery, and a model
    runs on the rows the subquery keeps, where the user wrote it (TPC-H Q21 as written, its
    sentiment filter beside EXISTS and NOT EXISTS: 465 calls at SF 0.1, not 8,590)."""
    kids = p.items(plan.children())
    mended = [models_last(p, k) for k in kids]
    if any(m is not k for m, k in zip(mended, kids)):  # a node is rebuilt only where one below was
        plan = plan.withNewChildren(p.to_seq(mended))
    if plan.getClass().getSimpleName() != "Filter":
        return plan
    conjuncts = p.split_and(plan.condition())
    subqueries = [p.has_subquery(c) for c in conjuncts]
    if not any(subqueries):  # the common case: no model call looked for
        return plan
    calls = [not q and bool(p.udf_calls([c])) for c, q in zip(conjuncts, subqueries)]
    if not any(calls):
        return plan
    logical = p.jvm.org.apache.spark.sql.catalyst.plans.logical
    above = _conjunction(p, [c for c, m in zip(conjuncts, calls) if m])
    rest = _conjunction(p, [c for c, m in zip(conjuncts, calls) if not m])
    return logical.Filter(above, logical.Filter(rest, plan.child()))


def _conjunction(p: PlanReader, exprs: list[JObj]) -> JObj:
    first, *others = exprs
    if not others:
        return first
    return p.jvm.org.apache.spark.sql.catalyst.expressions.And(first, _conjunction(p, others))


def remember_outer_conditions(p: PlanReader, plan: JObj) -> None:
    """The conjuncts that sit beside a subquery in one WHERE clause: they choose the
    outer rows the subquery is asked about, so they go below the outer, semi, anti or
    existence join Spark decorrelates it into (:func:`_outer_rows_first`)."""
    for cls, node in p.plans(plan):
        if cls != "Filter":
            continue
        conjuncts = p.split_and(node.condition())
        if any(p.has_subquery(c) for c in conjuncts):
            p.outer_conditions |= {c.canonicalized().toString() for c in conjuncts if not p.has_subquery(c)}


def read_filter(p: PlanReader, plan: JObj) -> Node:
    """σ, with conjuncts that need no UDF value placed below the φ chain: φ is row-wise,
    so this is the same task, and the model runs only on rows the plain predicates keep."""
    plan = _outer_rows_first(p, plan)
    if plan.getClass().getSimpleName() != "Filter":
        return p.node(plan)
    child = p.node(plan.child())
    conjuncts = p.split_and(plan.condition())
    scalars = scalar_subqueries(p, conjuncts)
    if scalars:  # σ_{x > (SELECT agg …)}(T) = π_T(σ_{x > a}(T × α(…))): a one-row cross join
        shown = tuple((c, column_expr(c)) for c in child.columns)
        return Projection(filtered(p, Join((child, *scalars), ()), conjuncts), shown)
    return filtered(p, child, conjuncts)


def _outer_rows_first(p: PlanReader, plan: JObj) -> JObj:
    """σ_{c ∧ x < s}(T ⟕ α(S)), decorrelated from ``WHERE c AND x < (SELECT …)``, as
    σ_{x < s}(σ_c(T) ⟕ α(S)), and likewise for the semi, anti and existence joins of
    EXISTS / IN: the same rows; the outer rows are those ``c`` keeps (docs/semantics.md),
    and T — often a comma join whose join conditions are in ``c`` — is never formed
    without them. A WHERE conjunct over an outer join the user wrote that reads only its
    kept side goes below it too, as Spark's optimizer puts it: the rows it rejects are
    neither output nor checked (TPC-DS q72's WHERE over two left joins: its eager capture
    stored the 9-way join unfiltered, 10+ minutes against plain Spark's 31 s)."""
    conjuncts = p.split_and(plan.condition())
    goes = [_goes_below(p, plan.child(), c) for c in conjuncts]
    early = [c for c, g in zip(conjuncts, goes) if g]
    if not early:
        return plan
    logical = p.jvm.org.apache.spark.sql.catalyst.plans.logical

    def below(node: JObj, cond: JObj) -> JObj:
        """``node`` with σ_cond as deep as the projections and outer joins' left sides
        that carry its columns."""
        kids = p.items(node.children())
        if _keeps_left(node) and cond.references().subsetOf(kids[0].outputSet()):
            return node.withNewChildren(p.to_seq([below(kids[0], cond), *kids[1:]]))
        return logical.Filter(cond, node)

    rest = [c for c, g in zip(conjuncts, goes) if not g]
    child = below(plan.child(), _conjunction(p, early))
    return logical.Filter(_conjunction(p, rest), child) if rest else child


def _keeps_left(node: JObj) -> bool:
    """A projection, or a join whose rows are its left rows, with or without more."""
    name = node.getClass().getSimpleName()
    return name == "Project" or (name == "Join" and node.joinType().toString().startswith(_LEFT_KEEPING))


def _goes_below(p: PlanReader, node: JObj, cond: JObj) -> bool:
    """Whether WHERE conjunct ``cond`` over ``node`` is applied below a left-keeping join:
    one beside a subquery (remembered before Spark decorrelated it), or a deterministic one
    that reads only the left side of the first such join under ``node``'s projections and
    calls no model: a model runs on the rows the user's joins keep, not on the rows a semi or
    anti join drops (CDA Q21 at SF 0.1: 8,590 sentiment calls below its two, not 465)."""
    if cond.canonicalized().toString() in p.outer_conditions:
        return True
    if not cond.deterministic() or p.has_subquery(cond) or p.udf_calls([cond]):
        return False
    while _keeps_left(node) and cond.references().subsetOf(p.items(node.children())[0].outputSet()):
        if node.getClass().getSimpleName() == "Join":
            return True
        node = p.items(node.children())[0]
    return False


def filtered(p: PlanReader, child: Node, conjuncts: list[JObj]) -> Node:
    """σ over ``child``: the plain conjuncts first, then one φ per model call the others
    read, σ on those, and π back to ``child``'s columns."""
    plain = [c for c in conjuncts if not p.udf_calls([c])]
    on_udfs = [c for c in conjuncts if p.udf_calls([c])]
    if plain:
        child = Selection(child, tuple(p.expr(c) for c in plain))
    if not on_udfs:
        return child
    with_udfs, udf_cols = p.functions(child, p.udf_calls(on_udfs), {})
    selected = Selection(with_udfs, tuple(p.expr(c, udf_cols) for c in on_udfs))
    return Projection(selected, tuple((c, column_expr(c)) for c in child.columns))


def scalar_subqueries(p: PlanReader, exprs: list[JObj]) -> list[Node]:
    """The uncorrelated scalar subqueries in ``exprs``, parsed; each one's value column is
    remembered so that the expression reads it (Spark's rules decorrelated the others)."""
    found: list[JObj] = []

    def visit(e: JObj) -> None:
        if e.getClass().getSimpleName() == "ScalarSubquery" and e.outerAttrs().isEmpty():
            found.append(e)
        else:
            for k in p.items(e.children()):
                visit(k)

    for e in exprs:
        visit(e)
    nodes = []
    for s in found:
        node = p.node(s.plan())
        if not _one_row(node):
            node = _at_most_one_row(p, node)
        (p.scalars[s.exprId().id()],) = visible(node)
        nodes.append(node)
    return nodes


def _at_most_one_row(p: PlanReader, node: Node) -> Aggregation:
    """A scalar subquery that is not a global aggregate as one: its value, NULL where it
    gives no row, and Spark's error where it gives several (α over it reads all its rows:
    the lineage of the value, docs/semantics.md)."""
    (value,) = visible(node)
    col = Col(p.fresh_id(value.name), value.name, value.dtype)
    message = "more than one row returned by a subquery used as an expression"
    sql = f"CASE WHEN count(1) > 1 THEN raise_error('{message}') ELSE max(`{value.id}`) END"
    return Aggregation(node, ((col, Expr(sql, frozenset({value.id}))),), ())


def _one_row(node: Node) -> bool:
    """Always exactly one row: a global aggregation (under projections)."""
    while isinstance(node, Projection):
        node = node.child
    return isinstance(node, Aggregation) and not node.keys


RULES: dict[str, Rule] = {"Filter": read_filter}

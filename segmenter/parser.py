"""Parse Spark's analyzed logical plan into an operator tree.

The analyzed plan keeps the user's operator order (the optimized one pushes filters below
joins and rewrites differences), so it is what a segmenter must see. Expressions become SQL
text over unique column ids, rebuilt on the JVM so every Spark function keeps its own syntax.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from pyspark.sql import DataFrame

from reasoning_udfs.udf import lookup, registered
from segmenter.errors import TIE_MARKER, UnsupportedTaskError
from segmenter.operators import (
    ID_TOKEN,
    Aggregation,
    Col,
    Difference,
    Expand,
    Expr,
    Function,
    Generate,
    Join,
    Node,
    OuterJoin,
    Projection,
    Selection,
    SortKey,
    Source,
    Task,
    Union,
    Window,
    column_expr,
    from_dict,
    to_dict,
)
from segmenter.rewrites import anti
from segmenter.sources import Keys, SourceReader, SourceResolver

JObj = Any  # a py4j JavaObject


# operators that change no row: partitioning, hints, names
_TRANSPARENT = {
    "SubqueryAlias",
    "View",
    "ResolvedHint",
    "Repartition",
    "RepartitionByExpression",
    "RebalancePartitions",
}
# Spark's own rules applied before parsing, each keeping every operator where the user wrote it:
# constants folded (``date '1998-12-01' - interval '90' day`` has no SQL text Spark reads back),
# and subqueries turned into the joins that decorrelate them (semi, anti, left outer)
_FOLDED = ("date", "integer")  # constants whose value comes back from the JVM as it went there
_PREPARE = (
    "ConstantFolding",
    "PullupCorrelatedPredicates",
    "RewriteCorrelatedScalarSubquery",
    "RewritePredicateSubquery",
)
_SUBQUERY_EXPRS = {
    "ScalarSubquery": "scalar subquery",
    "Exists": "EXISTS subquery",
    "ListQuery": "IN subquery",
    "InSubquery": "IN subquery",
    "LateralSubquery": "lateral subquery",
    "OuterReference": "correlated reference",
}
# what is left of subqueries once Spark's rules have decorrelated those they can
_SUBQUERY_HINT = {
    "ScalarSubquery": "a scalar subquery is accepted in a WHERE/HAVING condition or a SELECT list: "
    "move it there, or CROSS JOIN its one-row result",
}
_PREDICATE_HINT = "EXISTS/IN is decorrelated in a WHERE clause: move it there, or write a LEFT SEMI/ANTI JOIN"
_TOP_K = (
    "LIMIT is traced at the top of a task; inside one, number the rows instead: row_number() "
    "OVER (ORDER BY …) AS n in a subquery, then WHERE n <= k (traced where the order has no ties)"
)
_OPERATOR_HINTS = {
    "Sample": "a sample is not reproduced when lineage recomputes the task: filter on a hash of the key",
    "MapInPandas": "mapInPandas gives no row mapping: apply a ReasoningUDF per row instead",
    "FlatMapGroupsInPandas": "applyInPandas is not traced yet: GROUP BY with a ReasoningUDF per row",
    "LocalRelation": "inline data has no stable row ids: register it with register_table()",
    "LogicalRDD": "an in-memory DataFrame has no stable row ids: register it with register_table()",
    "Sort": "ORDER BY is supported only at the top of a task",
    "GlobalLimit": _TOP_K,
    "LocalLimit": _TOP_K,
}


def parse_dataframe(df: DataFrame, resolve: SourceResolver, text: str = "", keys: Keys | None = None) -> Task:
    """The task a (classic, not Spark Connect) DataFrame computes; ``keys``: the columns that
    identify the rows of sources read in place, by table name."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        raise UnsupportedTaskError("Spark Connect DataFrame", "task", "use a classic SparkSession")
    plan = jdf.queryExecution().analyzed()
    parser = _Parser(df.sparkSession._jvm, resolve, keys or {})
    task = parser.task(plan, text)
    parser.sources.check_keys()
    return task


def col_id(name: str, expr_id: int | str) -> str:
    """Unique, SQL-safe column id: the user's name (sanitised) plus Spark's expression id."""
    safe = re.sub(r"\W+", "_", name).strip("_")[:40] or "col"
    return f"{safe}__{expr_id}"


_SCOPED_ID = re.compile(r"(.*__u?\d+)((?:_w\d+)*)(_reason)?")


def rescoped(node: Node, before: str, after: str) -> Node | None:
    """``node`` (parsed under scope ``before``) with the ids it defines moved to scope ``after``:
    ``x__7<before><inner>`` becomes ``x__7<after><inner>``, as parsing the plan again under
    ``after`` names the columns that the operators above read; fresh ids (``x__u3``) get
    ``after`` appended, which no other column has. None if an id has another form."""
    prefix = _SCOPED_ID.fullmatch(f"x__0{before}")
    assert prefix is not None
    was = prefix.group(2).split("_w")[1:]
    renamed: dict[str, str] = {}
    for col in (c for n in node.walk() for c in n.columns):
        found = _SCOPED_ID.fullmatch(col.id)
        if found is None:
            return None
        base, scopes, reason = found.group(1), found.group(2).split("_w")[1:], found.group(3) or ""
        inner = scopes[len(was):] if scopes[: len(was)] == was else scopes
        renamed[col.id] = base + after + "".join(f"_w{s}" for s in inner) + reason
    text = json.dumps(to_dict(node))
    return from_dict(json.loads(ID_TOKEN.sub(lambda m: renamed.get(m.group(0), m.group(0)), text)))


def _visible(node: Node) -> list[Col]:
    return [c for c in node.columns if not c.is_reason]


class _Parser:
    def __init__(self, jvm: Any, resolve: SourceResolver, keys: Keys) -> None:
        self.jvm = jvm
        self.sources = SourceReader(resolve, keys, self._fresh_id)
        self.view: str | None = None  # the view a relation right below was read through
        self.unresolved = jvm.org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute
        self.to_seq = jvm.org.apache.spark.api.python.PythonUtils.toSeq
        self.fresh = 0
        self.path: list[str] = []
        self.ctes: dict[int, JObj] = {}
        self.scalars: dict[int, Col] = {}  # scalar subquery (expression id) -> its value column
        self.pivots: dict[str, list[Col]] = {}  # a pivot's array column -> one column per value
        self.outer_conditions: set[str] = set()  # see _remember_outer_conditions
        self.scope = ""  # suffix on column ids inside an inlined CTE body (one per reference)
        self.parsed: dict[int, list[tuple[JObj, str, Node]]] = {}  # by the plan's identity
        loader = jvm.Thread.currentThread().getContextClassLoader()
        self.replaceable = jvm.java.lang.Class.forName(
            "org.apache.spark.sql.catalyst.expressions.RuntimeReplaceable", True, loader
        )

    # --- helpers ------------------------------------------------------------------------------
    def _where(self) -> str:
        return " > ".join(self.path) or "task"

    def _fresh_id(self, name: str) -> str:
        self.fresh += 1
        return col_id(name, f"u{self.fresh}")

    def _hidden(self, name: str, e: JObj) -> Col:
        """A new column for the values of ``e`` that the user's task does not show."""
        return Col(self._fresh_id(name), name, e.dataType().simpleString())

    @staticmethod
    def _list(seq: JObj) -> list[JObj]:
        return [seq.apply(i) for i in range(seq.size())]

    def _cols(self, plan: JObj) -> tuple[Col, ...]:
        return tuple(self._attr_col(a) for a in self._list(plan.output()))

    def _attr_id(self, attr: JObj) -> str:
        return col_id(attr.name(), f"{attr.exprId().id()}{self.scope}")

    def _attr_col(self, attr: JObj) -> Col:
        return Col(self._attr_id(attr), attr.name(), attr.dataType().simpleString())

    def expr(self, e: JObj, udf_cols: dict[str, Col] | None = None) -> Expr:
        """SQL text of a JVM expression over column ids; UDF calls become their value columns."""
        refs: set[str] = set()
        rewritten = self._rewrite(e, refs, udf_cols or {})
        return Expr(rewritten.sql(), frozenset(refs))

    def _rewrite(self, e: JObj, refs: set[str], udf_cols: dict[str, Col]) -> JObj:
        cls = e.getClass().getSimpleName()
        if cls == "GetArrayItem" and (per_value := self._pivoted(e.child())) is not None:
            picked = per_value[e.ordinal().value()]
            refs.add(picked.id)
            return self.unresolved.quoted(picked.id)
        if cls == "ScalarSubquery" and e.exprId().id() in self.scalars:
            refs.add(self.scalars[e.exprId().id()].id)
            return self.unresolved.quoted(self.scalars[e.exprId().id()].id)
        if cls in _SUBQUERY_EXPRS:
            hint = _SUBQUERY_HINT.get(cls, _PREDICATE_HINT)
            raise UnsupportedTaskError(_SUBQUERY_EXPRS[cls], self._where(), hint)
        if cls == "AttributeReference":
            cid = self._attr_id(e)
            refs.add(cid)
            return self.unresolved.quoted(cid)
        if cls == "PythonUDF":
            key = self._udf_key(e)
            if key not in udf_cols:
                raise UnsupportedTaskError(
                    f"UDF {e.name()!r} inside a join condition or sort key",
                    self._where(),
                    "apply the UDF in a select/withColumn before the join",
                )
            cid = udf_cols[key].id
            refs.add(cid)
            return self.unresolved.quoted(cid)
        if not e.deterministic():
            raise UnsupportedTaskError(
                f"non-deterministic expression {e.prettyName()}()",
                self._where(),
                "lineage is traced by recomputation, which needs deterministic expressions",
            )
        if cls != "Literal" and e.foldable() and e.dataType().typeName() in _FOLDED:
            # a constant ConstantFolding could not reach (inside BETWEEN's parameters)
            literal = self.jvm.org.apache.spark.sql.catalyst.expressions.Literal
            return literal.create(e.eval(None), e.dataType())
        if cls == "Between":  # its SQL text comes from parameters that are not its children
            x, low, high = (self._rewrite(p, refs, udf_cols) for p in self._between_parts(e))
            ex = self.jvm.org.apache.spark.sql.catalyst.expressions
            return ex.And(ex.GreaterThanOrEqual(x, low), ex.LessThanOrEqual(x, high))
        if self.replaceable.isInstance(e):
            return self._rewrite(e.replacement(), refs, udf_cols)
        kids = self._list(e.children())
        if not kids:
            return e
        return e.withNewChildren(self.to_seq([self._rewrite(k, refs, udf_cols) for k in kids]))

    def _aggregate_outputs(self, item: JObj, udf_cols: dict[str, Col]) -> list[tuple[Col, Expr]]:
        """An aggregate's output column; for Spark's ``PivotFirst`` (an array: per pivot value
        the value of the group's one row with it, Spark grouped by the pivot column below),
        one column per pivot value, ``max(IF(p <=> v, x, NULL))`` (exact: at most one row
        has v), which the projection above reads instead of the array's elements."""
        inner = item.child() if item.getClass().getSimpleName() == "Alias" else item
        aggregate = inner.getClass().getSimpleName() == "AggregateExpression"
        pivot = inner.aggregateFunction() if aggregate else None
        if pivot is None or pivot.getClass().getSimpleName() != "PivotFirst":
            return [(self._attr_col(item.toAttribute()), self._item_expr(item, udf_cols))]
        ex = self.jvm.org.apache.spark.sql.catalyst.expressions
        column, value = pivot.pivotColumn(), pivot.valueColumn()
        missing = ex.Literal(None, value.dataType())
        values = [self._literal(v, column.dataType()) for v in self._list(pivot.pivotColumnValues())]
        picks = [
            ex.aggregate.Max(ex.If(ex.EqualNullSafe(column, v), value, missing)).toAggregateExpression()
            for v in values
        ]
        cols = [self._hidden(f"pivot{k}", pick) for k, pick in enumerate(picks)]
        self.pivots[self._attr_id(item.toAttribute())] = cols
        return [(c, self.expr(pick, udf_cols)) for c, pick in zip(cols, picks, strict=True)]

    def _pivoted(self, e: JObj) -> list[Col] | None:
        """The per-value columns of a pivot's array that ``e`` reads, if it reads one."""
        if e.getClass().getSimpleName() != "AttributeReference":
            return None
        return self.pivots.get(self._attr_id(e))

    def _literal(self, value: Any, dtype: JObj) -> JObj:
        """A literal for a value py4j brought back from the JVM: an object (a string or a
        decimal) or a date's days with its type; a number or boolean (py4j made it Python's)
        with the type Spark gives the Python value, which Spark coerces where it reads the
        SQL back, as it coerced the value written in the task."""
        ex = self.jvm.org.apache.spark.sql.catalyst.expressions
        if isinstance(value, bool | int | float) and dtype.typeName() not in ("date", "timestamp"):
            return getattr(getattr(ex, "Literal$"), "MODULE$").apply(value)
        return ex.Literal(value, dtype)

    def _between_parts(self, e: JObj) -> list[JObj]:
        """x, low, high of ``x BETWEEN low AND high``: constants from its parameters (as
        written), anything reading columns from its replacement, ``with(x' >= low' AND x' <=
        high', x' := x)``, which a rule that gives a relation new column ids (deduplicating a
        self-join) updates, while the parameters keep the old ids."""
        written = self._list(e.parameters())
        replacement = e.replacement()
        if replacement.getClass().getSimpleName() != "With" or replacement.defs().size() != 1:
            return written
        test = replacement.child()
        current = [replacement.defs().apply(0).child(), test.left().right(), test.right().right()]
        return [p if p.references().isEmpty() else c for p, c in zip(written, current)]

    def _udf_key(self, e: JObj) -> str:
        """Identity of a UDF call: the same function on the same arguments (two PythonUDF
        instances of one call, e.g. in SELECT and GROUP BY, differ in their result ids)."""
        args = ", ".join(a.toString() for a in self._list(e.children()))
        return f"{e.name()}({args})"

    # --- task ---------------------------------------------------------------------------------
    def prepared(self, plan: JObj) -> JObj:
        """``plan`` with :data:`_PREPARE` applied until nothing changes (a subquery nested in
        another, TPC-H Q20's scalar subquery inside an IN, surfaces only once its parent is
        rewritten; a plan without constants to fold or subqueries stays as it is)."""
        rules = self.jvm.org.apache.spark.sql.catalyst.optimizer
        plan = rules.ConstantFolding.apply(plan)
        self._remember_outer_conditions(plan)
        for _ in range(len(_PREPARE) + 1):
            before = plan
            for rule in _PREPARE:
                plan = getattr(rules, rule).apply(plan)
            if plan.fastEquals(before):
                break
        return plan

    def _remember_outer_conditions(self, plan: JObj) -> None:
        """The conjuncts that sit beside a subquery in one WHERE clause: they choose the
        outer rows the subquery is asked about, so they go below the outer, semi, anti or
        existence join Spark decorrelates it into (:meth:`_outer_rows_first`)."""
        for cls, node in self._plans(plan):
            if cls != "Filter":
                continue
            conjuncts = self._split_and(node.condition())
            if any(self._has_subquery(c) for c in conjuncts):
                self.outer_conditions |= {
                    c.canonicalized().toString() for c in conjuncts if not self._has_subquery(c)
                }

    def _plans(self, plan: JObj) -> Iterator[tuple[str, JObj]]:
        """Every plan node, subquery plans included."""
        yield plan.getClass().getSimpleName(), plan
        for child in self._list(plan.children()) + self._list(plan.subqueries()):
            yield from self._plans(child)

    def _has_subquery(self, e: JObj) -> bool:
        return bool(self.jvm.org.apache.spark.sql.catalyst.expressions.SubqueryExpression.hasSubquery(e))

    def task(self, plan: JObj, text: str) -> Task:
        plan = self.prepared(plan)
        output = self._cols(plan)
        limit: int | None = None
        order: tuple[SortKey, ...] = ()
        node = plan
        while True:
            name = node.getClass().getSimpleName()
            if name == "GlobalLimit" and limit is None and not order:
                limit = int(node.limitExpr().toString())
            elif name == "LocalLimit" or name in _TRANSPARENT:
                pass
            elif name == "Sort" and not order and getattr(node, "global")():
                self.path = ["Sort"]
                order = tuple(self._sort_key(s) for s in self._list(node.order()))
            elif name == "Project" and self._is_pure_select(node):
                pass
            elif name == "WithCTE":  # ORDER BY / LIMIT of a WITH query sit inside it
                self._remember_ctes(node)
                node = node.plan()
                continue
            else:
                break
            node = node.child()
        self.path = []
        root = self.node(node)
        if isinstance(root, Source):  # no operator: O = T, each row its own lineage
            root = Projection(root, tuple((c, column_expr(c)) for c in root.columns))
        return Task(root=root, output=output, order=order, limit=limit, text=text)

    def _sort_key(self, s: JObj) -> SortKey:
        return SortKey(
            expr=self.expr(s.child()),
            ascending=s.direction().sql() == "ASC",
            nulls_first=s.nullOrdering().sql() == "NULLS FIRST",
        )

    def _is_pure_select(self, project: JObj) -> bool:
        """A projection onto existing columns above a sort/limit (no new values)."""
        child = project.child().getClass().getSimpleName()
        items = self._list(project.projectList())
        plain = all(i.getClass().getSimpleName() == "AttributeReference" for i in items)
        return plain and child in ("Sort", "GlobalLimit", "LocalLimit")

    # --- operators ----------------------------------------------------------------------------
    def node(self, plan: JObj) -> Node:
        """``plan`` as an operator tree; a plan parsed before under another scope (a window's
        input, a CTE's body, read once per reference) is that tree with its ids renamed, the
        same tree a second walk over the JVM plan would build, without its py4j calls."""
        seen = self.parsed.setdefault(self.jvm.System.identityHashCode(plan), [])
        for before, scope, parsed in seen:
            if scope != self.scope and before.equals(plan):
                copy = rescoped(parsed, scope, self.scope)
                if copy is not None:
                    return copy
        parsed = self._node(plan)
        seen.append((plan, self.scope, parsed))
        return parsed

    def _node(self, plan: JObj) -> Node:
        name = plan.getClass().getSimpleName()  # nodeName() can differ ("Except All")
        self.path.append(name)
        try:
            if name in _TRANSPARENT:
                if name == "View":  # a temp or catalog view: the user's name for what it reads
                    self.view = str(plan.desc().identifier().table())
                return self.node(plan.child())
            self.view = None if name != "LogicalRelation" else self.view
            handler = getattr(self, f"_op_{name}", None)
            if handler is None:
                hint = _OPERATOR_HINTS.get(name, "only σ π ⋈ α ∪ − φ are supported")
                raise UnsupportedTaskError(f"operator {name}", self._where(), hint)
            return handler(plan)
        finally:
            self.path.pop()

    def _op_WithCTE(self, plan: JObj) -> Node:
        self._remember_ctes(plan)
        return self.node(plan.plan())

    def _remember_ctes(self, plan: JObj) -> None:
        for definition in self._list(plan.cteDefs()):
            self.ctes[definition.id()] = definition.child()

    @contextmanager
    def _own_ids(self) -> Iterator[None]:
        """Parse a plan again with column ids of its own, as a derived table written out
        twice would have, so that the two copies can meet in one join."""
        outer = self.scope
        self.fresh += 1
        self.scope = f"{outer}_w{self.fresh}"
        try:
            yield
        finally:
            self.scope = outer

    def _op_CTERelationRef(self, plan: JObj) -> Node:
        """Inline the WITH body; each reference gets its own column ids."""
        with self._own_ids():
            body = self.node(self.ctes[plan.cteId()])
        outputs = tuple(
            (self._attr_col(ref), column_expr(col))
            for ref, col in zip(self._list(plan.output()), _visible(body), strict=True)
        )
        return Projection(body, outputs)

    def _op_LogicalRelation(self, plan: JObj) -> Node:
        view, self.view = self.view, None
        return self.sources.leaf(plan, self._cols(plan), view)

    def _op_Filter(self, plan: JObj) -> Node:
        """σ, with conjuncts that need no UDF value placed below the φ chain: φ is row-wise,
        so this is the same task, and the model runs only on rows the plain predicates keep."""
        plan = self._outer_rows_first(plan)
        if plan.getClass().getSimpleName() != "Filter":
            return self.node(plan)
        child = self.node(plan.child())
        conjuncts = self._split_and(plan.condition())
        scalars = self._scalar_subqueries(conjuncts)
        if scalars:  # σ_{x > (SELECT agg …)}(T) = π_T(σ_{x > a}(T × α(…))): a one-row cross join
            shown = tuple((c, column_expr(c)) for c in child.columns)
            return Projection(self._filter(Join((child, *scalars), ()), conjuncts), shown)
        return self._filter(child, conjuncts)

    def _outer_rows_first(self, plan: JObj) -> JObj:
        """σ_{c ∧ x < s}(T ⟕ α(S)), decorrelated from ``WHERE c AND x < (SELECT …)``, as
        σ_{x < s}(σ_c(T) ⟕ α(S)), and likewise for the semi, anti and existence joins of
        EXISTS / IN: the same rows; the outer rows are those ``c`` keeps (docs/semantics.md),
        and T — often a comma join whose join conditions are in ``c`` — is never formed
        without them."""
        conjuncts = self._split_and(plan.condition())
        early = [c for c in conjuncts if c.canonicalized().toString() in self.outer_conditions]
        if not early:
            return plan
        ex = self.jvm.org.apache.spark.sql.catalyst.expressions
        logical = self.jvm.org.apache.spark.sql.catalyst.plans.logical

        def below(node: JObj, cond: JObj) -> JObj:
            """``node`` with σ_cond as deep as the projections and outer joins' left sides
            that carry its columns."""
            kids = self._list(node.children())
            name = node.getClass().getSimpleName()
            keeps_left = name == "Join" and node.joinType().toString().startswith(_LEFT_KEEPING)
            if (keeps_left or name == "Project") and cond.references().subsetOf(kids[0].outputSet()):
                return node.withNewChildren(self.to_seq([below(kids[0], cond), *kids[1:]]))
            return logical.Filter(cond, node)

        def conjunction(exprs: list[JObj]) -> JObj:
            return exprs[0] if len(exprs) == 1 else ex.And(exprs[0], conjunction(exprs[1:]))

        rest = [c for c in conjuncts if c.canonicalized().toString() not in self.outer_conditions]
        child = below(plan.child(), conjunction(early))
        return logical.Filter(conjunction(rest), child) if rest else child

    def _filter(self, child: Node, conjuncts: list[JObj]) -> Node:
        plain = [c for c in conjuncts if not self._udf_calls([c])]
        on_udfs = [c for c in conjuncts if self._udf_calls([c])]
        if plain:
            child = Selection(child, tuple(self.expr(c) for c in plain))
        if not on_udfs:
            return child
        with_udfs, udf_cols = self._functions(child, self._udf_calls(on_udfs), {})
        selected = Selection(with_udfs, tuple(self.expr(c, udf_cols) for c in on_udfs))
        return Projection(selected, tuple((c, column_expr(c)) for c in child.columns))

    def _scalar_subqueries(self, exprs: list[JObj]) -> list[Node]:
        """The uncorrelated scalar subqueries in ``exprs``, parsed; each one's value column is
        remembered so that the expression reads it (Spark's rules decorrelated the others)."""
        found: list[JObj] = []

        def visit(e: JObj) -> None:
            if e.getClass().getSimpleName() == "ScalarSubquery" and e.outerAttrs().isEmpty():
                found.append(e)
            else:
                for k in self._list(e.children()):
                    visit(k)

        for e in exprs:
            visit(e)
        nodes = []
        for s in found:
            node = self.node(s.plan())
            if not _one_row(node):
                node = self._at_most_one_row(node)
            (self.scalars[s.exprId().id()],) = _visible(node)
            nodes.append(node)
        return nodes

    def _at_most_one_row(self, node: Node) -> Aggregation:
        """A scalar subquery that is not a global aggregate as one: its value, NULL where it
        gives no row, and Spark's error where it gives several (α over it reads all its rows:
        the lineage of the value, docs/semantics.md)."""
        (value,) = _visible(node)
        col = Col(self._fresh_id(value.name), value.name, value.dtype)
        message = "more than one row returned by a subquery used as an expression"
        sql = f"CASE WHEN count(1) > 1 THEN raise_error('{message}') ELSE max(`{value.id}`) END"
        return Aggregation(node, ((col, Expr(sql, frozenset({value.id}))),), ())

    def _split_and(self, e: JObj) -> list[JObj]:
        if e.getClass().getSimpleName() == "And":
            return self._split_and(e.left()) + self._split_and(e.right())
        return [e]

    def _op_Project(self, plan: JObj) -> Node:
        items = self._list(plan.projectList())
        child = self.node(plan.child())
        scalars = self._scalar_subqueries(items)
        if scalars:  # SELECT …, (SELECT agg …): each row with the one-row results, as in WHERE
            child = Join((child, *scalars), ())
        udf_calls = self._udf_calls(items)
        aliases = {
            self._udf_key(i.child()): self._attr_col(i.toAttribute())
            for i in items
            if i.getClass().getSimpleName() == "Alias" and i.child().getClass().getSimpleName() == "PythonUDF"
        }
        node, udf_cols = self._functions(child, udf_calls, aliases)
        # one column per id: Spark lists a window's values twice in the projection above it
        unique = {self._attr_id(i.toAttribute()): i for i in items}.values()
        outputs = tuple((self._attr_col(i.toAttribute()), self._item_expr(i, udf_cols)) for i in unique)
        visible = tuple(c for c in node.columns if not c.is_reason)
        if tuple(c for c, _ in outputs) == visible and all(e.is_column() == c.id for c, e in outputs):
            return node  # the projection only appends UDF values: φ alone (Definition 4)
        return Projection(node, outputs)

    def _item_expr(self, item: JObj, udf_cols: dict[str, Col]) -> Expr:
        if item.getClass().getSimpleName() == "Alias":
            return self.expr(item.child(), udf_cols)
        return self.expr(item, udf_cols)

    def _udf_calls(self, exprs: list[JObj]) -> list[JObj]:
        """PythonUDF calls, innermost first, each call once."""
        found: dict[str, JObj] = {}

        def visit(e: JObj) -> None:
            for k in self._list(e.children()):
                visit(k)
            if e.getClass().getSimpleName() == "PythonUDF":
                found.setdefault(self._udf_key(e), e)

        for e in exprs:
            visit(e)
        return list(found.values())

    def _functions(
        self, child: Node, calls: list[JObj], aliases: dict[str, Col]
    ) -> tuple[Node, dict[str, Col]]:
        """Stack one φ per UDF call on ``child``; returns the top and call → value column."""
        udf_cols: dict[str, Col] = {}
        node = child
        for call in calls:
            name = call.name()
            if not registered(name):
                raise UnsupportedTaskError(
                    f"UDF {name!r} is not a ReasoningUDF",
                    self._where(),
                    "declare it as a reasoning_udfs.ReasoningUDF with main() and main_with_reason()",
                )
            udf = lookup(name)
            args = tuple(self.expr(a, udf_cols) for a in self._list(call.children()))
            key = self._udf_key(call)
            value = aliases.get(key) or self._hidden(name, call)
            reason = Col(f"{value.id}_reason", f"{value.name}_reason", udf.reason_type, is_reason=True)
            node = Function(node, name, args, value, reason)
            udf_cols[key] = value
        return node, udf_cols

    def _op_Join(self, plan: JObj) -> Node:
        join_type = plan.joinType().toString()
        cond = plan.condition()
        left = self.node(plan.left())
        right = self.node(plan.right())
        conjuncts = self._split_and(cond.get()) if cond.isDefined() else []
        on_udfs = [c for c in conjuncts if self._udf_calls([c])]
        if on_udfs and join_type not in ("Inner", "Cross"):
            raise UnsupportedTaskError(
                "UDF call in the condition of an outer, semi or anti join",
                self._where(),
                "apply the UDF in a select/withColumn before the join",
            )
        condition = tuple(self.expr(c) for c in conjuncts if not self._udf_calls([c]))
        if join_type in ("Inner", "Cross"):
            inputs: list[Node] = []
            conds: list[Expr] = []
            for side in (left, right):
                if isinstance(side, Join) and not side.semi:
                    inputs += side.inputs
                    conds += side.condition
                else:
                    inputs.append(side)
            joined = Join(tuple(inputs), tuple(conds) + condition)
            # a model in the condition: φ over the pairs the plain conditions keep, then σ
            return self._filter(joined, on_udfs) if on_udfs else joined
        if join_type == "LeftSemi":
            return Join((left, right), condition, semi=True)
        if join_type == "LeftAnti":
            return anti(left, right, condition)
        if join_type in _OUTER:
            joined = OuterJoin(left, right, condition, _OUTER[join_type])
        else:  # ExistenceJoin(exists#n): EXISTS/IN under OR or in a SELECT list, a flag per left row
            joined = OuterJoin(left, right, condition, "exists", self._attr_col(plan.joinType().exists()))
        shown = self._cols(plan)
        if [c.id for c in shown] == [c.id for c in joined.columns]:
            return joined
        renamed = zip(shown, joined.columns, strict=True)
        return Projection(joined, tuple((s, column_expr(o)) for s, o in renamed))

    def _op_Generate(self, plan: JObj) -> Node:
        """γ for explode/posexplode/inline (a model's list output included: its φ goes below)."""
        gen = plan.generator()
        name = gen.prettyName()
        if name not in _GENERATORS:
            raise UnsupportedTaskError(
                f"generator {name}()", self._where(), f"only {', '.join(_GENERATORS)} are traced"
            )
        child = self.node(plan.child())
        calls = self._udf_calls([gen])
        node, udf_cols = self._functions(child, calls, {}) if calls else (child, {})
        args = tuple(self.expr(a, udf_cols) for a in self._list(gen.children()))
        outputs = tuple(self._attr_col(a) for a in self._list(plan.generatorOutput()))
        generated = Generate(node, name, args, bool(plan.outer()), outputs)
        shown = self._cols(plan)
        if shown == generated.columns:
            return generated
        return Projection(generated, tuple((c, column_expr(c)) for c in shown))

    def _op_Window(self, plan: JObj) -> Node:
        """ω: window functions appended to their input's rows (docs/semantics.md defines them
        by their rewrite into joins and aggregations). Traced are aggregates over whole
        partitions, and over the rows up to the current one and its peers (``rank()``,
        ``dense_rank()``, a running aggregate ``sum(x) OVER (… ORDER BY o)``; ``row_number()``
        and a ROWS running frame where no two rows of a partition tie on the order, which
        a filter checks while the task runs). A row's frame: its partition's rows, those
        that sort before it or tie with it where no function reads the whole partition."""
        items = self._list(plan.windowExpressions())
        kinds = [self._window_kind(i.child()) for i in items]
        partition = self._list(plan.partitionSpec())
        sorts = self._list(plan.orderSpec())
        child = self.node(plan.child())
        by_partition = [self.expr(p) for p in partition]  # each expression rebuilt once (a JVM trip)
        sort_keys = [self._sort_key(o) for o in sorts]
        spec = _over(by_partition, sort_keys)
        functions = tuple(
            (self._attr_col(i.toAttribute()), self._window_function(i.child().windowFunction(), kind, spec))
            for i, kind in zip(items, kinds, strict=True)
        )
        ordered = all(k != "whole" for k in kinds)
        framed = [("partition_key", p, e) for p, e in zip(partition, by_partition)]
        framed += [("order_key", o.child(), k.expr) for o, k in zip(sorts, sort_keys)] if ordered else []
        keys = tuple((self._hidden(n, j), e) for n, j, e in framed)
        frame_keys = tuple((self._hidden(f"frame_{n}", j), e) for n, j, e in framed)
        parts = len(partition)
        if not keys:  # OVER (): one frame, the whole input, under a constant key (a probe needs one)
            keys = ((Col(self._fresh_id("whole"), "whole", "int"), Expr("1")),)
            frame_keys = ((Col(self._fresh_id("frame_whole"), "whole", "int"), Expr("1")),)
            parts = 1
        row = [column_expr(c) for c, _ in keys]
        candidate = [column_expr(c) for c, _ in frame_keys]
        frame = [_null_safe_eq(a, b) for a, b in zip(candidate[:parts], row[:parts])]
        if parts < len(row):
            ties = [_null_safe_eq(a, b) for a, b in zip(candidate[parts:], row[parts:])]
            frame.append(_or(_precedes(list(zip(candidate[parts:], row[parts:], sorts))), _and(ties)))
        window = Window(child, functions, keys, frame_keys, tuple(frame), parts)
        if not any(kind in _TOTAL_ORDER for kind in kinds):
            return window
        by = _over([*by_partition, *(k.expr for k in sort_keys)], [])
        peers = Expr(f"count(1) OVER ({by.sql})", by.refs)
        return replace(window, peers=peers, tie_error=self._tie_error(plan))

    def _window_function(self, function: JObj, kind: str, spec: Expr) -> Expr:
        """``f(…) OVER (spec frame)``, with the frame Spark gives the function."""
        name = function.getClass().getSimpleName()
        call = Expr(f"{_RANKING[name]}()", frozenset()) if name in _RANKING else self.expr(function)
        return Expr(f"{call.sql} OVER ({spec.sql}{_FRAMES[kind]})", call.refs | spec.refs)

    def _tie_error(self, plan: JObj) -> str:
        """Why the task fails where two rows of a partition tie on the order (docs/semantics.md):
        ``row_number()`` and a ROWS frame read ties in an order Spark does not fix, so neither
        their values nor their lineage are defined."""
        partition = ", ".join(p.sql() for p in self._list(plan.partitionSpec()))
        order = ", ".join(o.sql() for o in self._list(plan.orderSpec()))
        spec = (f"PARTITION BY {partition} " if partition else "") + f"ORDER BY {order}"
        return (
            f"{TIE_MARKER}a window ({spec}) at {self._where()} orders two rows of a partition "
            "that tie on its ORDER BY, in an order Spark does not fix: row_number() and ROWS frames "
            f"are traced only where the order is unique; add a column that breaks the tie{TIE_MARKER}"
        )

    def _window_kind(self, window: JObj) -> str:
        """``whole`` (an aggregate over its whole partition), ``running`` (an aggregate over
        RANGE UNBOUNDED PRECEDING .. CURRENT ROW: the rows before and the peers), ``rank`` or
        ``dense_rank``; ``row_number`` and ``rows_running`` (ROWS UNBOUNDED PRECEDING ..
        CURRENT ROW) where the order is total on the data (``_ordered_values``); anything else
        is refused: a sliding frame or ``lag``/``lead`` reads rows by position."""
        function = window.windowFunction()
        name = function.getClass().getSimpleName()
        frame = window.windowSpec().frameSpecification()
        bounds = ("", "", "")
        if frame.getClass().getSimpleName() == "SpecifiedWindowFrame":
            ends = (frame.frameType(), frame.lower(), frame.upper())
            bounds = tuple(e.getClass().getSimpleName().rstrip("$") for e in ends)
        if name == "AggregateExpression" and bounds[1:] == ("UnboundedPreceding", "UnboundedFollowing"):
            return "whole"
        if name == "AggregateExpression" and bounds == ("RangeFrame", "UnboundedPreceding", "CurrentRow"):
            return "running"
        if name == "AggregateExpression" and bounds == ("RowFrame", "UnboundedPreceding", "CurrentRow"):
            return "rows_running"
        if name in _RANKING:
            return _RANKING[name]
        shown = function.aggregateFunction() if name == "AggregateExpression" else function
        raise UnsupportedTaskError(
            f"window function {shown.prettyName()}() over {_frame_sql(frame)}",
            self._where(),
            "traced are aggregates over whole partitions, rank(), dense_rank(), row_number() and "
            "running aggregates over RANGE or ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW: "
            "a sliding frame, lag() or lead() reads rows by position",
        )

    def _op_Aggregate(self, plan: JObj) -> Node:
        child = self.node(plan.child())
        groups = self._list(plan.groupingExpressions())
        items = self._list(plan.aggregateExpressions())
        calls = self._udf_calls(groups + items)
        node, udf_cols = self._functions(child, calls, {}) if calls else (child, {})
        outputs = [pair for i in items for pair in self._aggregate_outputs(i, udf_cols)]
        shown = [c for c, _ in outputs]
        key_ids: list[str] = []
        hidden = False
        for g in groups:
            g_expr = self.expr(g, udf_cols)
            match = next((c for c, e in outputs if e.sql == g_expr.sql), None)
            if match is None:
                match = self._hidden("group_key", g)
                outputs.append((match, g_expr))
                hidden = True
            if match.id not in key_ids:  # GROUP BY d_year, …, d_year (TPC-DS q11): one key
                key_ids.append(match.id)
        agg = Aggregation(node, tuple(outputs), tuple(key_ids))
        if not hidden:
            return agg
        return Projection(agg, tuple((c, column_expr(c)) for c in shown))

    def _op_Distinct(self, plan: JObj) -> Node:
        return distinct(self.node(plan.child()))

    def _op_Deduplicate(self, plan: JObj) -> Node:
        keys = {k.exprId().id() for k in self._list(plan.keys())}
        if keys != {a.exprId().id() for a in self._list(plan.child().output())}:
            raise UnsupportedTaskError(
                "dropDuplicates on a subset of columns",
                self._where(),
                "it keeps an arbitrary row per key; use distinct() or GROUP BY",
            )
        return self._op_Distinct(plan)

    def _op_Expand(self, plan: JObj) -> Node:
        """ROLLUP/CUBE/GROUPING SETS: Spark expands each input row once per grouping set (the
        keys left out as NULL, the set's number as ``spark_grouping_id``) and aggregates by
        all of them; ε keeps the expansion as one operator over T (docs/semantics.md)."""
        projections = tuple(
            tuple(self.expr(e) for e in self._list(items)) for items in self._list(plan.projections())
        )
        return Expand(self.node(plan.child()), projections, self._cols(plan))

    def _op_Union(self, plan: JObj) -> Node:
        inputs = tuple(self.node(c) for c in self._list(plan.children()))
        return Union(inputs, self._cols(plan))

    def _op_Intersect(self, plan: JObj) -> Node:
        """T₁ ∩ T₂ = distinct(T₁ ⋉ T₂ on every column, NULL matching NULL) (docs/semantics.md)."""
        if plan.isAll():
            raise UnsupportedTaskError(
                "INTERSECT ALL",
                self._where(),
                "write INTERSECT (distinct rows) or a LEFT SEMI JOIN on the columns that must agree",
            )
        left, right = self.node(plan.left()), self.node(plan.right())
        pairs = zip(left.match_columns(), right.match_columns(), strict=True)
        condition = tuple(Expr(f"(`{a.id}` <=> `{b.id}`)", frozenset({a.id, b.id})) for a, b in pairs)
        return distinct(Join((left, right), condition, semi=True))

    def _op_Except(self, plan: JObj) -> Node:
        left = self.node(plan.left())
        right = self.node(plan.right())
        return Difference(left, right, "all" if plan.isAll() else "distinct")


def distinct(child: Node) -> Aggregation:
    """δ as α grouping by every column."""
    cols = child.match_columns()
    return Aggregation(child, tuple((c, column_expr(c)) for c in cols), tuple(c.id for c in cols))


def _one_row(node: Node) -> bool:
    """Always exactly one row: a global aggregation (under projections)."""
    while isinstance(node, Projection):
        node = node.child
    return isinstance(node, Aggregation) and not node.keys


def _null_safe_eq(a: Expr, b: Expr) -> Expr:
    return Expr(f"({a.sql} <=> {b.sql})", a.refs | b.refs)


def _and(exprs: list[Expr]) -> Expr:
    return Expr("(" + " AND ".join(e.sql for e in exprs) + ")", frozenset().union(*(e.refs for e in exprs)))


def _or(a: Expr, b: Expr) -> Expr:
    return Expr(f"({a.sql} OR {b.sql})", a.refs | b.refs)


def _over(partition: list[Expr], order: list[SortKey]) -> Expr:
    """A window's ``PARTITION BY … ORDER BY …`` (frame left out)."""
    parts = []
    if partition:
        parts.append("PARTITION BY " + ", ".join(e.sql for e in partition))
    if order:
        keys = (
            f"{k.expr.sql} {'ASC' if k.ascending else 'DESC'} NULLS {'FIRST' if k.nulls_first else 'LAST'}"
            for k in order
        )
        parts.append("ORDER BY " + ", ".join(keys))
    refs = frozenset().union(*(e.refs for e in partition), *(k.expr.refs for k in order))
    return Expr(" ".join(parts), refs)


def _precedes(keys: list[tuple[Expr, Expr, JObj]]) -> Expr:
    """``a`` sorts strictly before ``b`` in the window's order (lexicographic over the sort
    keys, with each key's direction and NULL placement); never NULL."""
    (a, b, sort), rest = keys[0], keys[1:]
    nulls_first = sort.nullOrdering().sql() == "NULLS FIRST"
    first, last = (a, b) if nulls_first else (b, a)
    op = "<" if sort.direction().sql() == "ASC" else ">"
    refs = a.refs | b.refs
    here = Expr(
        f"(({first.sql} IS NULL AND {last.sql} IS NOT NULL) OR coalesce({a.sql} {op} {b.sql}, false))", refs
    )
    if not rest:
        return here
    return _or(here, _and([_null_safe_eq(a, b), _precedes(rest)]))


def _frame_sql(frame: JObj) -> str:
    """A window frame as the user wrote it. Spark's own ``sql()`` keeps the analyzer's
    offset: ``2 PRECEDING`` is stored as -2 and shown as ``-2 FOLLOWING``."""
    if frame.getClass().getSimpleName() != "SpecifiedWindowFrame":
        return str(frame.sql())
    ends = []
    for bound in (frame.lower(), frame.upper()):
        kind = bound.getClass().getSimpleName().rstrip("$")
        if kind in _FRAME_ENDS:
            ends.append(_FRAME_ENDS[kind])
        elif bound.foldable() and isinstance(offset := bound.eval(None), int):
            ends.append(f"{-offset} PRECEDING" if offset < 0 else f"{offset} FOLLOWING")
        else:
            ends.append(str(bound.sql()))
    rows = frame.frameType().getClass().getSimpleName().startswith("RowFrame")
    return f"{'ROWS' if rows else 'RANGE'} BETWEEN {ends[0]} AND {ends[1]}"


_FRAME_ENDS = {
    "UnboundedPreceding": "UNBOUNDED PRECEDING",
    "UnboundedFollowing": "UNBOUNDED FOLLOWING",
    "CurrentRow": "CURRENT ROW",
}
_GENERATORS = ("explode", "posexplode", "inline")
_RANKING = {"Rank": "rank", "DenseRank": "dense_rank", "RowNumber": "row_number"}
_FRAMES = {  # a window kind's frame, as Spark gives it to the function
    "whole": " ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING",
    "running": " RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
    "rows_running": " ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
    "rank": "",
    "dense_rank": "",
    "row_number": "",
}
_TOTAL_ORDER = ("row_number", "rows_running")  # defined only where the data has no ties

# joins whose rows are left rows, with or without more: a filter on the left commutes with them
_LEFT_KEEPING = ("LeftOuter", "LeftSemi", "LeftAnti", "ExistenceJoin")

# Spark's outer join types -> OuterJoin's kind
_OUTER = {"LeftOuter": "left", "RightOuter": "right", "FullOuter": "full"}

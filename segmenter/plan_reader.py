"""The reader of Spark's analyzed plan: what every construct's rule reads it with.

The analyzed plan keeps the user's operator order (the optimized one pushes filters below
joins and rewrites differences), so it is what a segmenter must see. Expressions become SQL
text over unique column ids, rebuilt on the JVM so every Spark function keeps its own syntax.
The reader knows no operator: :meth:`PlanReader.node` hands each plan node to the rule
registered for its class (``segmenter/constructs``), which reads its children back through it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from reasoning_udfs.udf import lookup, registered
from segmenter.errors import UnsupportedTaskError
from segmenter.operators import ID_TOKEN, Col, Expr, Function, Node, SortKey, from_dict, to_dict
from segmenter.sources import Keys, SourceReader, SourceResolver

JObj = Any  # a py4j JavaObject
Rule = Callable[["PlanReader", JObj], Node]  # one construct's reading of a plan node

# operators that change no row: partitioning, hints, names
TRANSPARENT = {
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
        inner = scopes[len(was) :] if scopes[: len(was)] == was else scopes
        renamed[col.id] = base + after + "".join(f"_w{s}" for s in inner) + reason
    text = json.dumps(to_dict(node))
    return from_dict(json.loads(ID_TOKEN.sub(lambda m: renamed.get(m.group(0), m.group(0)), text)))


def visible(node: Node) -> list[Col]:
    return [c for c in node.columns if not c.is_reason]


class PlanReader:
    """Reads plan nodes with the rules of ``rules`` (Spark class name -> rule), keeping the
    state a walk over one task shares: column scopes, CTE bodies, scalar subqueries, pivots."""

    def __init__(self, jvm: Any, resolve: SourceResolver, keys: Keys, rules: Mapping[str, Rule]) -> None:
        self.jvm = jvm
        self.rules = rules
        self.sources = SourceReader(resolve, keys, self.fresh_id)
        self.view: str | None = None  # the view a relation right below was read through
        self.unresolved = jvm.org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute
        self.to_seq = jvm.org.apache.spark.api.python.PythonUtils.toSeq
        self.fresh = 0
        self.path: list[str] = []
        self.ctes: dict[int, JObj] = {}
        self.scalars: dict[int, Col] = {}  # scalar subquery (expression id) -> its value column
        self.pivots: dict[str, list[Col]] = {}  # a pivot's array column -> one column per value
        self.outer_conditions: set[str] = set()  # see constructs.selections.remember_outer_conditions
        self.scope = ""  # suffix on column ids inside an inlined CTE body (one per reference)
        self.parsed: dict[int, list[tuple[JObj, str, Node]]] = {}  # by the plan's identity
        loader = jvm.Thread.currentThread().getContextClassLoader()
        self.replaceable = jvm.java.lang.Class.forName(
            "org.apache.spark.sql.catalyst.expressions.RuntimeReplaceable", True, loader
        )

    def where(self) -> str:
        return " > ".join(self.path) or "task"

    def fresh_id(self, name: str) -> str:
        self.fresh += 1
        return col_id(name, f"u{self.fresh}")

    def hidden(self, name: str, e: JObj) -> Col:
        """A new column for the values of ``e`` that the user's task does not show."""
        return Col(self.fresh_id(name), name, e.dataType().simpleString())

    @staticmethod
    def items(seq: JObj) -> list[JObj]:
        return [seq.apply(i) for i in range(seq.size())]

    def cols(self, plan: JObj) -> tuple[Col, ...]:
        return tuple(self.attr_col(a) for a in self.items(plan.output()))

    def attr_id(self, attr: JObj) -> str:
        return col_id(attr.name(), f"{attr.exprId().id()}{self.scope}")

    def attr_col(self, attr: JObj) -> Col:
        return Col(self.attr_id(attr), attr.name(), attr.dataType().simpleString())

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
            raise UnsupportedTaskError(_SUBQUERY_EXPRS[cls], self.where(), hint)
        if cls == "AttributeReference":
            cid = self.attr_id(e)
            refs.add(cid)
            return self.unresolved.quoted(cid)
        if cls == "PythonUDF":
            key = self.udf_key(e)
            if key not in udf_cols:
                raise UnsupportedTaskError(
                    f"UDF {e.name()!r} inside a join condition or sort key",
                    self.where(),
                    "apply the UDF in a select/withColumn before the join",
                )
            cid = udf_cols[key].id
            refs.add(cid)
            return self.unresolved.quoted(cid)
        if not e.deterministic():
            raise UnsupportedTaskError(
                f"non-deterministic expression {e.prettyName()}()",
                self.where(),
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
        kids = self.items(e.children())
        if not kids:
            return e
        return e.withNewChildren(self.to_seq([self._rewrite(k, refs, udf_cols) for k in kids]))

    def _pivoted(self, e: JObj) -> list[Col] | None:
        """The per-value columns of a pivot's array that ``e`` reads, if it reads one."""
        if e.getClass().getSimpleName() != "AttributeReference":
            return None
        return self.pivots.get(self.attr_id(e))

    def _between_parts(self, e: JObj) -> list[JObj]:
        """x, low, high of ``x BETWEEN low AND high``: constants from its parameters (as
        written), anything reading columns from its replacement, ``with(x' >= low' AND x' <=
        high', x' := x)``, which a rule that gives a relation new column ids (deduplicating a
        self-join) updates, while the parameters keep the old ids."""
        written = self.items(e.parameters())
        replacement = e.replacement()
        if replacement.getClass().getSimpleName() != "With" or replacement.defs().size() != 1:
            return written
        test = replacement.child()
        current = [replacement.defs().apply(0).child(), test.left().right(), test.right().right()]
        return [p if p.references().isEmpty() else c for p, c in zip(written, current)]

    def udf_key(self, e: JObj) -> str:
        """Identity of a UDF call: the same function on the same arguments (two PythonUDF
        instances of one call, e.g. in SELECT and GROUP BY, differ in their result ids)."""
        args = ", ".join(a.toString() for a in self.items(e.children()))
        return f"{e.name()}({args})"

    def sort_key(self, s: JObj) -> SortKey:
        return SortKey(
            expr=self.expr(s.child()),
            ascending=s.direction().sql() == "ASC",
            nulls_first=s.nullOrdering().sql() == "NULLS FIRST",
        )

    def split_and(self, e: JObj) -> list[JObj]:
        if e.getClass().getSimpleName() == "And":
            return self.split_and(e.left()) + self.split_and(e.right())
        return [e]

    def plans(self, plan: JObj) -> Iterator[tuple[str, JObj]]:
        """Every plan node, subquery plans included."""
        yield plan.getClass().getSimpleName(), plan
        for child in self.items(plan.children()) + self.items(plan.subqueries()):
            yield from self.plans(child)

    def has_subquery(self, e: JObj) -> bool:
        return bool(self.jvm.org.apache.spark.sql.catalyst.expressions.SubqueryExpression.hasSubquery(e))

    def udf_calls(self, exprs: list[JObj]) -> list[JObj]:
        """PythonUDF calls, innermost first, each call once."""
        found: dict[str, JObj] = {}

        def visit(e: JObj) -> None:
            for k in self.items(e.children()):
                visit(k)
            if e.getClass().getSimpleName() == "PythonUDF":
                found.setdefault(self.udf_key(e), e)

        for e in exprs:
            visit(e)
        return list(found.values())

    def functions(
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
                    self.where(),
                    "declare it as a reasoning_udfs.ReasoningUDF with main() and main_with_reason()",
                )
            udf = lookup(name)
            args = tuple(self.expr(a, udf_cols) for a in self.items(call.children()))
            key = self.udf_key(call)
            value = aliases.get(key) or self.hidden(name, call)
            reason = Col(f"{value.id}_reason", f"{value.name}_reason", udf.reason_type, is_reason=True)
            node = Function(node, name, args, value, reason)
            udf_cols[key] = value
        return node, udf_cols

    def item_expr(self, item: JObj, udf_cols: dict[str, Col]) -> Expr:
        if item.getClass().getSimpleName() == "Alias":
            return self.expr(item.child(), udf_cols)
        return self.expr(item, udf_cols)

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
            if name in TRANSPARENT:
                if name == "View":  # a temp or catalog view: the user's name for what it reads
                    self.view = str(plan.desc().identifier().table())
                return self.node(plan.child())
            self.view = None if name != "LogicalRelation" else self.view
            rule = self.rules.get(name)
            if rule is None:
                hint = _OPERATOR_HINTS.get(name, "only σ π ⋈ α ∪ − φ are supported")
                raise UnsupportedTaskError(f"operator {name}", self.where(), hint)
            return rule(self, plan)
        finally:
            self.path.pop()

    def remember_ctes(self, plan: JObj) -> None:
        for definition in self.items(plan.cteDefs()):
            self.ctes[definition.id()] = definition.child()

    @contextmanager
    def own_ids(self) -> Iterator[None]:
        """Parse a plan again with column ids of its own, as a derived table written out
        twice would have, so that the two copies can meet in one join."""
        outer = self.scope
        self.fresh += 1
        self.scope = f"{outer}_w{self.fresh}"
        try:
            yield
        finally:
            self.scope = outer

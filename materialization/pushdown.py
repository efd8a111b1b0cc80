"""Semi-join push-down (paper §6.1): restrict each input to rows that can reach the targets.

A :class:`Restriction` says "keep rows whose columns equal some row of ``values``". It is
pushed through every operator along the columns that pass it unchanged (and across an inner
join's ``a = b``: a value that restricts a restricts b's input too); a column computed by
the operator (an aggregate, a UDF value) simply stops being a constraint. For a difference
only the left input is restricted: (T1 − T2) ⋉ Ō → (T1 ⋉ Ō) − T2; for an outer join only
an input whose unmatched rows are kept, and only where the other's are not (⟕: the left).

On Spark, a restriction whose values are few and held in process is written as literals (a
filter, and the targets' ids as a CASE): a broadcast join, even of a local relation, costs a
Spark job of its own, and literals reach the Parquet scan as filters.
"""

from __future__ import annotations

import datetime
import decimal
import operator
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import reduce
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from materialization.compile import ROW_ID, ident, null_safe_match
from segmenter.operators import (
    Aggregation,
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
    Source,
    Union,
    Window,
)

BROADCAST_ROWS = 200_000
# at most this many values held in process, and equalities in all, are written as literals:
# Spark's optimizer runs out of memory on a disjunction of 27 rows of 26 columns above a join
LITERAL_ROWS = 64
LITERAL_TERMS = 64
# exact Python types whose Spark literal, cast to the values' column type, is that value
# (not float: a literal's text; not datetime: a time zone)
_LITERAL_TYPES = (int, str, bool, decimal.Decimal, datetime.date)


@dataclass(frozen=True)
class Restriction:
    values: Any  # a DataFrame (or another engine's relation: tracing.engines)
    on: dict[str, str]  # column of ``values`` -> column id of the restricted node
    rows: int
    complete: bool = False  # values are whole reasoning-mode rows of the node's output
    numbered: bool = False  # values carry ROW_ID: answers keep which target each row serves
    local: pa.Table | None = None  # the values' rows, where the engine holds them in process

    def apply(self, df: DataFrame) -> DataFrame:
        on = {node_col: value_col for value_col, node_col in self.on.items() if node_col in df.columns}
        if not on:
            return df
        literals = self._literals(on)
        if literals is not None:
            return df.where(literals[0])
        return null_safe_match(df, self._values(on.values(), distinct=False), on, "left_semi")

    def attach(self, df: DataFrame) -> DataFrame:
        """``df`` ⋉ the values, each kept row once per target it serves (its ``ROW_ID``)."""
        if not self.numbered:
            return self.apply(df)
        on = {node_col: value_col for value_col, node_col in self.on.items() if node_col in df.columns}
        literals = self._literals(on)
        if literals is not None:  # each match's targets as an array, one row per target
            kept, groups = literals
            ids: Column | None = None
            for test, targets in groups:
                array = F.array(*[F.lit(i).cast("bigint") for i in sorted(targets)])
                ids = F.when(test, array) if ids is None else ids.when(test, array)
            return df.where(kept).withColumn(ROW_ID, F.explode(ids))
        return null_safe_match(df, self._values([*on.values(), ROW_ID]), on, "inner", carry=[ROW_ID])

    def literal_values(self, on: dict[str, str]) -> dict[str, list[Any]] | None:
        """Per restricted column (``on``: it -> the values' column), the values in order,
        where they are few, held in process and of literal types (every engine may then
        write them as literals); None otherwise."""
        rows = self.local
        if rows is None or rows.num_rows > LITERAL_ROWS or rows.num_rows * len(on) > LITERAL_TERMS:
            return None
        values = {k: rows.column(v).to_pylist() for k, v in on.items()}
        if any(x is not None and type(x) not in _LITERAL_TYPES for xs in values.values() for x in xs):
            return None
        return values

    def _literals(self, on: dict[str, str]) -> tuple[Column, list[tuple[Column, set[int]]]] | None:
        """Where the values are few, held here and of literal types: the test a row must pass
        to be kept, and per distinct value of the ``on`` columns the null-safe test of a row
        against it with the targets (``ROW_ID``) it serves; None otherwise. The test to keep
        a row looks each column up in its values first (Spark hashes a long IN list), so
        that a scan of many rows rarely evaluates the tests of whole values."""
        values = self.literal_values(on)
        if values is None:
            return None
        rows = self.local
        assert rows is not None
        types = {f.name: f.dataType.simpleString() for f in self.values.schema.fields}
        made: dict[tuple[str, Any], Column] = {}

        def literal(k: str, x: Any) -> Column:
            """``x`` in the values' own type (compared as the join would), made once: each
            Column is a few JVM round trips, and a value is both tested and looked up."""
            if (k, x) not in made:
                made[k, x] = F.lit(x).cast(types[on[k]])
            return made[k, x]

        ids = rows.column(ROW_ID).to_pylist() if self.numbered else [0] * rows.num_rows
        groups: dict[tuple[Any, ...], set[int]] = {}
        for i, row_id in enumerate(ids):
            groups.setdefault(tuple(xs[i] for xs in values.values()), set()).add(row_id)
        tests = [
            (_all_of([F.col(ident(k)).eqNullSafe(literal(k, x)) for k, x in zip(on, key)]), targets)
            for key, targets in groups.items()
        ]
        looked_up = []
        for k, xs in values.items():
            present = [literal(k, x) for x in dict.fromkeys(xs) if x is not None]
            found = F.col(ident(k)).isin(*present) if present else F.lit(False)
            looked_up.append(found | F.col(ident(k)).isNull() if None in xs else found)
        if len(on) > 1:  # one column's lookup is its null-safe test
            looked_up.append(_any_of([test for test, _ in tests]))
        return _all_of(looked_up), tests

    def _values(self, cols: Iterable[str], distinct: bool = True) -> DataFrame:
        """The values' ``cols``, broadcast when there are few: each distinct once, except
        that a broadcast semi-join's values need not be (a duplicate matches nothing more,
        and their distinct would cost a shuffle job where the values are a local relation)."""
        values = self.values.selectExpr(*map(ident, dict.fromkeys(cols)))
        if self.rows > BROADCAST_ROWS:
            return values.distinct()
        return F.broadcast(values.distinct() if distinct else values)

    def narrowed(self, mapping: dict[str, str]) -> Restriction | None:
        """The restriction on a child, given node column -> child column for passing columns
        (on none: no restriction, or, numbered, all rows for each of the targets)."""
        on = {v: mapping[n] for v, n in self.on.items() if n in mapping}
        return replace(self, on=on, complete=False) if on or self.numbered else None


def _all_of(tests: Sequence[Column]) -> Column:
    return reduce(operator.and_, tests, F.lit(True))  # Spark drops the literal


def _any_of(tests: Sequence[Column]) -> Column:
    return reduce(operator.or_, tests, F.lit(False))


def passing_columns(node: Node, equal: Sequence[tuple[str, str]] = ()) -> list[dict[str, str]]:
    """Per child of ``node``: output column id -> child column id, for unchanged columns.
    ``equal``: column pairs a selection right above a join equates (a comma join's WHERE)."""
    if isinstance(node, (Selection, Function, Generate)):
        return [{c.id: c.id for c in node.child.columns}]
    if isinstance(node, Projection):
        return [{c.id: e.is_column() for c, e in node.outputs if e.is_column()}]  # type: ignore[misc]
    if isinstance(node, Join):
        maps = [{c.id: c.id for c in child.columns} for child in node.inputs]
        if node.semi:
            return maps[:1] + [{}]
        for a, b in [*_equated(node.condition), *equal]:  # joined on a = b: a restricts b's input too
            for m in maps:
                if b in m and a not in m:
                    m[a] = b
                if a in m and b not in m:
                    m[b] = a
        return maps
    if isinstance(node, OuterJoin):
        # a kept side's row is matched against the whole other side, and padded only if
        # nothing there matches: restricting the other side would pad rows that do match
        sides = (node.left, node.right)
        other = {1 - k for k in node.kept}
        return [{} if i in other else {c.id: c.id for c in s.match_columns()} for i, s in enumerate(sides)]
    if isinstance(node, Aggregation):
        return [{c.id: e.is_column() for c, e in node.keys if e.is_column()}]  # type: ignore[misc]
    if isinstance(node, Window):  # a restriction on other columns would cut frames short
        return [node.partition_columns()]
    if isinstance(node, Expand):  # a key a grouping set leaves NULL does not restrict T
        return [node.passed()]
    if isinstance(node, Union):
        return [{o.id: s.id for s, o in zip(child.match_columns(), node.outputs)} for child in node.inputs]
    if isinstance(node, Difference):
        return [{c.id: c.id for c in node.left.match_columns()}, {}]
    if isinstance(node, Source):
        return []
    raise TypeError(f"unknown operator {type(node).__name__}")


_EQUALS = re.compile(r"\(`?([A-Za-z0-9_]+)`? = `?([A-Za-z0-9_]+)`?\)")


def _equated(condition: Sequence[Expr]) -> list[tuple[str, str]]:
    """Pairs of columns a condition equates (``a = b`` of two bare columns: the same type,
    and every row that passes has equal, non-NULL values there)."""
    pairs = []
    for e in condition:
        found = _EQUALS.fullmatch(e.sql)
        if found and {found[1], found[2]} == set(e.refs):
            pairs.append((found[1], found[2]))
    return pairs


def push_to_leaves(
    top: Node, leaves: tuple[Node, ...], restriction: Restriction | None
) -> dict[int, Restriction | None]:
    """Restriction for each leaf (keyed by ``id(leaf)``) below ``top``."""
    out: dict[int, Restriction | None] = {}
    leaf_ids = {id(leaf) for leaf in leaves}

    def visit(node: Node, r: Restriction | None, equal: Sequence[tuple[str, str]] = ()) -> None:
        if id(node) in leaf_ids:
            out[id(node)] = r
            return
        below = _equated(node.condition) if isinstance(node, Selection) else ()
        for child, mapping in zip(node.children, passing_columns(node, equal)):
            visit(child, r.narrowed(mapping) if r is not None else None, below)

    visit(top, restriction)
    return out

"""Semi-join push-down (paper §6.1): restrict each input to rows that can reach the targets.

A :class:`Restriction` says "keep rows whose columns equal some row of ``values``". It is
pushed through every operator along the columns that pass it unchanged (and across an inner
join's ``a = b``: a value that restricts a restricts b's input too); a column computed by
the operator (an aggregate, a UDF value) simply stops being a constraint. For a difference
only the left input is restricted: (T1 − T2) ⋉ Ō → (T1 ⋉ Ō) − T2.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from materialization.compile import ROW_ID, ident, null_safe_match
from segmenter.operators import (
    Aggregation,
    Difference,
    Expr,
    Function,
    Generate,
    Join,
    Node,
    Projection,
    Selection,
    Source,
    Union,
)

BROADCAST_ROWS = 200_000


@dataclass(frozen=True)
class Restriction:
    values: Any  # a DataFrame (or another engine's relation: tracing.engines)
    on: dict[str, str]  # column of ``values`` -> column id of the restricted node
    rows: int
    complete: bool = False  # values are whole reasoning-mode rows of the node's output
    numbered: bool = False  # values carry ROW_ID: answers keep which target each row serves

    def apply(self, df: DataFrame) -> DataFrame:
        on = {node_col: value_col for value_col, node_col in self.on.items() if node_col in df.columns}
        if not on:
            return df
        return null_safe_match(df, self._values(on.values(), distinct=False), on, "left_semi")

    def attach(self, df: DataFrame) -> DataFrame:
        """``df`` ⋉ the values, each kept row once per target it serves (its ``ROW_ID``)."""
        if not self.numbered:
            return self.apply(df)
        on = {node_col: value_col for value_col, node_col in self.on.items() if node_col in df.columns}
        return null_safe_match(df, self._values([*on.values(), ROW_ID]), on, "inner", carry=[ROW_ID])

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
    if isinstance(node, Aggregation):
        return [{c.id: e.is_column() for c, e in node.keys if e.is_column()}]  # type: ignore[misc]
    if isinstance(node, Union):
        return [{o.id: s.id for s, o in zip(child.match_columns(), node.outputs)} for child in node.inputs]
    if isinstance(node, Difference):
        return [{c.id: c.id for c in node.left.match_columns()}, {}]
    if isinstance(node, Source):
        return []
    raise TypeError(f"unknown operator {type(node).__name__}")


_EQUALS = re.compile(r"^\(`?([A-Za-z0-9_]+)`? = `?([A-Za-z0-9_]+)`?\)$")


def _equated(condition: Sequence[Expr]) -> list[tuple[str, str]]:
    """Pairs of columns a condition equates (``a = b`` of two bare columns: the same type,
    and every row that passes has equal, non-NULL values there)."""
    pairs = []
    for e in condition:
        found = _EQUALS.match(e.sql)
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

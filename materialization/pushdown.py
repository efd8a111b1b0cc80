"""Semi-join push-down (paper §6.1): restrict each input to rows that can reach the targets.

A :class:`Restriction` says "keep rows whose columns equal some row of ``values``". It is
pushed through every operator along the columns that pass it unchanged; a column computed by
the operator (an aggregate, a UDF value) simply stops being a constraint. For a difference
only the left input is restricted: (T1 − T2) ⋉ Ō → (T1 ⋉ Ō) − T2.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from materialization.compile import null_safe_match
from segmenter.operators import (
    Aggregation,
    Difference,
    Function,
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

    def apply(self, df: DataFrame) -> DataFrame:
        on = {node_col: value_col for value_col, node_col in self.on.items() if node_col in df.columns}
        if not on:
            return df
        values = self.values.select(*dict.fromkeys(on.values())).distinct()
        if self.rows <= BROADCAST_ROWS:
            values = F.broadcast(values)
        return null_safe_match(df, values, on, "left_semi")

    def narrowed(self, mapping: dict[str, str]) -> Restriction | None:
        """The restriction on a child, given node column -> child column for passing columns."""
        on = {v: mapping[n] for v, n in self.on.items() if n in mapping}
        return replace(self, on=on, complete=False) if on else None


def passing_columns(node: Node) -> list[dict[str, str]]:
    """Per child of ``node``: output column id -> child column id, for unchanged columns."""
    if isinstance(node, (Selection, Function)):
        return [{c.id: c.id for c in node.child.columns}]
    if isinstance(node, Projection):
        return [{c.id: e.is_column() for c, e in node.outputs if e.is_column()}]  # type: ignore[misc]
    if isinstance(node, Join):
        maps = [{c.id: c.id for c in child.columns} for child in node.inputs]
        return maps[:1] + [{}] if node.semi else maps
    if isinstance(node, Aggregation):
        return [{c.id: e.is_column() for c, e in node.keys if e.is_column()}]  # type: ignore[misc]
    if isinstance(node, Union):
        return [{o.id: s.id for s, o in zip(child.match_columns(), node.outputs)} for child in node.inputs]
    if isinstance(node, Difference):
        return [{c.id: c.id for c in node.left.match_columns()}, {}]
    if isinstance(node, Source):
        return []
    raise TypeError(f"unknown operator {type(node).__name__}")


def push_to_leaves(
    top: Node, leaves: tuple[Node, ...], restriction: Restriction | None
) -> dict[int, Restriction | None]:
    """Restriction for each leaf (keyed by ``id(leaf)``) below ``top``."""
    out: dict[int, Restriction | None] = {}
    leaf_ids = {id(leaf) for leaf in leaves}

    def visit(node: Node, r: Restriction | None) -> None:
        if id(node) in leaf_ids:
            out[id(node)] = r
            return
        for child, mapping in zip(node.children, passing_columns(node)):
            visit(child, r.narrowed(mapping) if r is not None else None)

    visit(top, restriction)
    return out

"""Which columns identify an operator's rows: a key carried up from the source tables.

A restriction that covers a key compares one or two columns per row instead of every one
(CDA Q9 restricted its stored φ segment, part rows with their images, on all ten columns of
part, the image among them). Only operators that keep a row's identity pass a key up; any
other operator (a union, an aggregation, explode, grouping sets) gives none.
"""

from __future__ import annotations

from segmenter.operators import Function, Join, Node, Projection, Selection, Source, Window


def row_key(node: Node) -> tuple[str, ...] | None:
    """Column ids of ``node``'s output that no two of its rows share, or None if unknown."""
    if isinstance(node, Source):
        return node.key or None
    if isinstance(node, Selection | Function | Window):  # ω appends values to each row
        return row_key(node.child)
    if isinstance(node, Projection):
        below = row_key(node.child)
        kept = {e.is_column(): c.id for c, e in node.outputs if e.is_column()}
        return None if below is None or not set(below) <= set(kept) else tuple(kept[k] for k in below)
    if isinstance(node, Join):
        # an inner join's row is one row of each input; a semi-join's is its left row
        keys = [row_key(kid) for kid in node.inputs[: 1 if node.semi else None]]
        return None if any(k is None for k in keys) else tuple(c for k in keys for c in k)  # type: ignore[union-attr]
    return None
